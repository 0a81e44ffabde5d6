"""The static checker: every registered check against its known-bad examples, every shipped schedule
clean, the analyses' numbers by hand, the driver's crash boundary, and `cake check`'s exit codes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cake.experiments.schedules import shipped_schedule_paths
from cake.ir import analysis as an
from cake.ir.check import check, check_text, errors
from cake.ir.checks.context import CheckContext
from cake.ir.checks.fixtures import BASES, PINGPONG, TCGEN05, FixtureEditError, derive
from cake.ir.checks.registry import Backend, CheckSpec, Family, all_checks
from cake.ir.parser import parse
from cake.ir.rules import facts
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from cake.cli import main
from cake.diagnostics import DiagnosticError, Severity
from cake.errors import InternalError, is_internal

REPO = Path(__file__).resolve().parents[2]
SHIPPED = shipped_schedule_paths()
EXAMPLES = [(spec.id, i, ex) for spec in all_checks() for i, ex in enumerate(spec.examples)]


@pytest.mark.parametrize(("code", "index", "example"), EXAMPLES, ids=[f"{c}-{i}" for c, i, _ in EXAMPLES])
def test_known_bad_example_raises_exactly_its_id(code, index, example) -> None:
    diagnostics = check_text(example.text, f"{code}.cake", arch=example.arch, backend=example.backend,
                             dims=example.dims)
    assert sorted({d.code for d in errors(diagnostics)}) == [code], [d.message for d in diagnostics]
    spec = next(s for s in all_checks() if s.id == code)
    for d in diagnostics:
        if d.code == code:
            assert d.message != spec.title, "the message template was not filled"
            assert d.span is not None and d.subject and d.label
            assert "internal error" not in d.message


def test_registry_ids_are_stable_and_complete() -> None:
    specs = all_checks()
    ids = [s.id for s in specs]
    assert len(ids) == len(set(ids))
    for spec in specs:
        assert re.fullmatch(r"E0[1-6]\d\d", spec.id), spec.id
        assert spec.id.startswith(spec.family.value)
        assert spec.examples and spec.title and spec.message
    families = {s.family for s in specs}
    assert families == {f for f in Family if f is not Family.LEARNED}
    assert {s.id for s in specs if s.backend is Backend.TRITON} == {"E0601", "E0602", "E0603", "E0604", "E0605", "E0606", "E0607", "E0608"}
    assert {s.id for s in specs if s.backend is Backend.CUDA} == {"E0610", "E0611", "E0612", "E0613", "E0614", "E0615",
                                                                   "E0616"}


@pytest.mark.parametrize("name", sorted(BASES))
def test_fixture_bases_check_clean(name: str) -> None:
    assert check_text(BASES[name], f"{name}.cake") == ()


def test_plain_base_is_triton_clean_and_specialized_ones_are_not() -> None:
    assert check_text(BASES["plain"], "plain.cake", backend="triton") == ()
    assert errors(check_text(BASES["pingpong"], "pp.cake", backend="triton"))
    assert check_text(BASES["pingpong"], "pp.cake", backend="cuda") == ()


@pytest.mark.parametrize("path", SHIPPED, ids=[str(p.relative_to(REPO)) for p in SHIPPED])
def test_shipped_schedule_checks_clean(path: Path) -> None:
    text = path.read_text()
    diagnostics = check_text(text, path.name)
    assert errors(diagnostics) == (), [d.message for d in diagnostics]
    kernel = parse(text, path.name)
    fx = facts(kernel)
    triton_shaped = (not fx["warp_specialized"] and "tma" not in fx["copy_kinds"] and fx["mbarriers"] == 0
                     and set(fx["mma_families"]) <= {"dot"} and "tmem" not in text)
    if triton_shaped:
        assert errors(check_text(text, path.name, backend="triton")) == ()


def test_shipped_pingpong_budget_is_proven_once_D_is_bound() -> None:
    path = REPO / "experiments" / "kmeans" / "assign_pingpong.cake"
    unbound = check_text(path.read_text(), path.name)
    assert [(d.code, d.severity) for d in unbound] == [("E0301", Severity.NOTE)]
    assert check_text(path.read_text(), path.name, dims={"D": 128}) == ()


def test_derive_refuses_an_edit_that_does_not_match_once() -> None:
    with pytest.raises(FixtureEditError):
        derive(PINGPONG, ("arrive", "wait"))
    with pytest.raises(FixtureEditError):
        derive(PINGPONG, ("no such text", ""))


# ------------------------------------------------------------------------------------------- analyses


def _ctx(text: str, arch: str | None = None) -> CheckContext:
    kernel = parse(text, "t.cake")
    return CheckContext(kernel, arch or kernel.target, None)


def test_pingpong_budgets_by_hand() -> None:
    ctx = _ctx(PINGPONG)
    launch = ctx.kernel.launches[0]
    layout = an.smem_layout(launch, ctx.env)
    # xs: 2 x 128*128*2, cs: 4 x 128*128*2, csq: 4 x 128*4, then 12 mbarriers x 8 bytes.
    assert [b.bytes for b in layout.buffers] == [65536, 131072, 2048]
    assert layout.total_bytes == 65536 + 131072 + 2048 + 12 * 8 + 1024  # + base-alignment slack: ptxas reports 199,776
    assert [b.offset_bytes % b.align_bytes for b in layout.buffers] == [0, 0, 0]
    assert ctx.arch is not None
    regs = an.register_budget(launch, ctx.env, ctx.arch)
    assert sum(r.total for r in regs) == 128 * 40 + 2 * 128 * 232 == 64512
    assert an.launch_threads(launch, ctx.env) == 384


def test_barrier_accounting_of_pingpong() -> None:
    ctx = _ctx(PINGPONG)
    launch = ctx.kernel.launches[0]
    uses = an.barrier_accounting(launch, ctx.env)
    assert uses["c_empty"].arrivals == (2, 2, 2, 2) and uses["c_empty"].declared_arrivals == 2
    assert uses["x_empty"].arrivals == (1, 1)  # each consumer replica releases its own element
    assert uses["c_full"].tx_sequences == ((128 * 128 * 2 + 128 * 4,) * 4,)  # one loop: one phase sequence
    assert uses["c_full"].tx_sequences[0] == (uses["c_full"].declared_tx,) * 4
    assert uses["x_full"].tx_sequences == ((128 * 128 * 2,) * 2,)


def test_happens_before_is_acyclic_and_orders_fill_before_read() -> None:
    ctx = _ctx(PINGPONG)
    hb = ctx.happens_before(ctx.kernel.launches[0])
    assert hb is not None and hb.find_cycle() is None
    # producer's first x copy (path (0, 1)) -> consumer[1]'s mma (inside its loop at (3, 1)).
    assert hb.ordered(("producer", 0, (0, 1)), ("consumer", 1, (3, 1)))
    assert not hb.ordered(("consumer", 1, (3, 1)), ("producer", 0, (0, 1)))


def test_tmem_usage_rounds_to_a_power_of_two() -> None:
    ctx = _ctx(TCGEN05.replace("tmem acc_t: f32[BM, BN]", "tmem acc_t: f32[BM, 48]"), "sm_100a")
    usage = an.tmem_usage(ctx.kernel.launches[0], ctx.env)
    assert (usage.columns_used, usage.columns_allocated, usage.lanes_max) == (48, 64, 128)


def test_value_reports_what_is_unbound() -> None:
    from cake.ir.nodes import BinOp, BinOpKind, Name

    with pytest.raises(an.Unbound) as info:
        an.value(BinOp(BinOpKind.MUL, Name("BN"), Name("D")), an.Env({"BN": 128}))
    assert info.value.names == ("D",)


# ------------------------------------------------------------------------------------------ the driver


def test_a_crashing_check_is_an_internal_error_not_a_diagnostic() -> None:
    def broken(ctx):  # a check with a bug in it
        return [ctx.kernel.launches[99]]

    spec = CheckSpec("L-9999", "broken", "{x}", Family.LEARNED, broken, ())
    with pytest.raises(InternalError) as info:
        check(parse(PINGPONG, "t.cake"), rules=(spec,), file="t.cake")
    error = info.value
    assert error.stage == "check L-9999 (broken)" and error.cause.startswith("IndexError")
    assert is_internal(str(error)) and "bug in CAKE" in error.report() and "Traceback" not in error.report()
    assert parse(error.schedule or "", "again.cake") == parse(PINGPONG, "t.cake")  # the report reproduces it


def test_unknown_arch_skips_arch_checks_with_one_diagnostic() -> None:
    diagnostics = check(parse(PINGPONG, "t.cake"), arch="sm_75")
    assert [d.code for d in diagnostics] == ["E0500"]


def test_unknown_backend_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown backend"):
        check(parse(PINGPONG, "t.cake"), backend="opencl")


def test_parse_errors_come_back_as_diagnostics() -> None:
    diagnostics = check_text("schedule x implements", "bad.cake")
    assert diagnostics and all(d.is_error for d in diagnostics)


def _mutations(text: str) -> st.SearchStrategy[str]:
    lines = text.splitlines()
    tokens = sorted({t for t in re.findall(r"[A-Za-z_][A-Za-z0-9_]*|\d+", text)})
    drop = st.integers(0, len(lines) - 1).map(lambda i: "\n".join(lines[:i] + lines[i + 1:]))
    swap = st.tuples(st.sampled_from(tokens), st.sampled_from(tokens + ["0", "1", "300", "7"])).map(
        lambda ab: re.sub(rf"\b{re.escape(ab[0])}\b", ab[1], text, count=1))
    return st.one_of(drop, swap)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow],
          phases=(Phase.explicit, Phase.reuse, Phase.generate))
@given(st.sampled_from(sorted(BASES)).flatmap(lambda name: _mutations(BASES[name])),
       st.sampled_from([None, "triton"]))
def test_mutated_schedules_never_crash_a_check(text: str, backend: str | None) -> None:
    try:
        kernel = parse(text, "m.cake")
    except DiagnosticError:
        return
    for d in check(kernel, backend=backend, file="m.cake"):
        assert "internal error" not in d.message, d.message


def test_random_kernels_never_crash_a_check() -> None:
    strategies = pytest.importorskip("tests.ir.strategies", reason="the IR's Hypothesis strategies")

    # No shrinking: a random kernel's failure prints as generated, and CI time stays bounded.
    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck),
              phases=(Phase.explicit, Phase.reuse, Phase.generate))
    @given(strategies.kernels, st.sampled_from([None, "sm_80", "sm_100a"]))
    def run(kernel, arch) -> None:
        for d in check(kernel, arch=arch, backend="triton"):
            assert "internal error" not in d.message, d.message

    run()


# --------------------------------------------------------------------------------------------- the CLI


def test_cli_exit_codes(tmp_path: Path, capsys) -> None:
    good = tmp_path / "good.cake"
    good.write_text(BASES["plain"])
    bad = tmp_path / "bad.cake"
    bad.write_text(PINGPONG.replace("arrivals 2 free", "arrivals 1 free"))
    assert main(["check", str(good)]) == 0
    assert main(["check", str(good), str(bad)]) == 1
    out = capsys.readouterr().out
    assert "error[E0402]" in out and f"{bad}:19:35" in out
    assert main(["check", str(tmp_path / "missing.cake")]) == 2
    assert main(["check"]) == 2
    assert main(["check", str(good), "--arch", "sm_75"]) == 2
    assert main(["check", str(good), "--dim", "D=x"]) == 2


def test_cli_json_and_backend(tmp_path: Path, capsys) -> None:
    path = tmp_path / "pp.cake"
    path.write_text(PINGPONG)
    assert main(["check", str(path), "--backend", "triton", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert {d["code"] for d in data} >= {"E0601", "E0604"}
    assert all(d["file"] == str(path) and d["severity"] == "error" for d in data)


def test_cli_list_prints_every_check(capsys) -> None:
    assert main(["check", "--list"]) == 0
    out = capsys.readouterr().out
    for spec in all_checks():
        assert spec.id in out
