"""ptxas `-v` output -> ResourceReport: exact figures per kernel, budgets, the RES-02 mapping, JSON."""

from __future__ import annotations

from cake.lowering.cuda.compile import ResourceReport, parse_ptxas_report, span_for_generated_line

from cake.arch import arch

LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'sched_assign' for 'sm_90a'
ptxas info    : Function properties for sched_assign
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 168 registers, used 16 barriers
ptxas info    : (C7507) Potential Performance Loss: 'setmaxnreg' ignored to maintain minimum register requirements.
ptxas info    : Compile time = 347.579 ms
ptxas info    : Compiling entry function 'sched_norms' for 'sm_90a'
ptxas info    : Function properties for sched_norms
    24 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 1024 bytes smem, 456 bytes cmem[0]
ptxas info    : Compile time = 11.151 ms
"""


def report() -> ResourceReport:
    return parse_ptxas_report(LOG, "sm_90a", smem_dynamic_bytes={"sched_assign": 200 * 1024},
                              tmem_columns={"sched_assign": 0})


def test_figures_per_kernel() -> None:
    r = report()
    a, n = r.kernel("sched_assign"), r.kernel("sched_norms")
    assert (a.registers, a.barriers, a.smem_static_bytes, a.spill_bytes, a.stack_frame_bytes) == (168, 16, 0, 0, 0)
    assert (n.registers, n.barriers, n.smem_static_bytes, n.cmem_bytes) == (32, 1, 1024, 456)
    assert (n.spill_store_bytes, n.spill_load_bytes, n.stack_frame_bytes) == (8, 12, 24)
    assert r.smem_bytes("sched_assign") == 200 * 1024
    assert any(w.startswith("(C7507)") for w in r.warnings)


def test_budgets_and_gate_mapping() -> None:
    r = report()
    assert r.over_budget(arch("sm_90a")) == ()
    over = r.over_budget(arch("sm_80"))  # 200 KB of shared memory does not fit an A100 block
    assert over and "shared memory" in over[0] and "sched_assign" in over[0]
    assert r.gate_mapping() == {"arch": "sm_90a", "registers_per_thread": 168, "smem_bytes": 200 * 1024,
                                "tmem_columns": 0, "spill_bytes": 20}


def test_json_round_trip_and_table() -> None:
    r = report()
    assert ResourceReport.from_json(r.to_json()) == r
    table = r.table()
    assert "sched_assign [sm_90a]: 168 regs" in table and "spills 8/12 B st/ld" in table


def test_compile_errors_map_back_to_ir_spans() -> None:
    source = "a\n  // @L12:5 let dot\n  x = 1;\n  y = 2;\n"
    span = span_for_generated_line(source, 4)
    assert span is not None and (span.line, span.column) == (12, 5)
    assert span_for_generated_line(source, 1) is None
