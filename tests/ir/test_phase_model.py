"""E0411: an explicit `phase` is checked against the barrier's arrival history (what try_wait.parity does)."""

from __future__ import annotations

from pathlib import Path

from cake.ir.check import check
from cake.ir.checks.fixtures import TCGEN05
from cake.ir.parser import parse

from cake.diagnostics import render

PINGPONG = Path(__file__).parents[2] / "experiments" / "flash_kmeans" / "assign_pingpong.cake"

# TCGEN05's pipelined loop unrolled to one K step: every wait runs once, so a fixed phase can be right.
ONE_STEP = TCGEN05.replace("""  for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
    copy a[tm*BM : +BM, k*BK : +BK] -> as_[s] via tma masked signals full[s]
    copy b[tn*BN : +BN, k*BK : +BK] -> bs[s] via tma masked signals full[s]
    wait full[s]
    mma as_[s], bs[s].T -> acc_t via tcgen05.m128n128k16 accumulate signals done[s]
    wait done[s]
  }
""", """  copy a[tm*BM : +BM, 0 : +BK] -> as_[0] via tma masked signals full[0]
  copy b[tn*BN : +BN, 0 : +BK] -> bs[0] via tma masked signals full[0]
  wait full[0] phase 0
  mma as_[0], bs[0].T -> acc_t via tcgen05.m128n128k16 signals done[0]
  wait done[0] phase 0
""")


def _e0411(text: str, name: str = "t.cake") -> list:  # type: ignore[type-arg]
    return [d for d in check(parse(text, name), file=name) if d.code == "E0411"]


def test_the_hanging_pingpong_is_refused_at_its_phase() -> None:
    """The H200 hang (experiments/gpu_cuda_assign.py, case 5): the producer's first wait on the `free` ring
    `c_empty` pinned to phase 0 waits for the consumers' release, which needs the data this producer copies."""
    text = PINGPONG.read_text().replace("      wait c_empty[s]\n", "      wait c_empty[s] phase 0\n")
    [d] = _e0411(text, "assign_pingpong.cake")
    assert (d.span.line, d.span.column) == (42, 29)
    assert d.message == ("`wait c_empty[s] phase 0` in role `producer`: `c_empty` is `free`, so the first phase "
                         "this wait needs is already complete (parity 1); phase 0 waits one phase longer, for a "
                         "release by consumer[0], consumer[1]")
    assert d.notes == ("that release (consumer[0]: c_empty[s]) happens after this wait: the kernel hangs",)
    assert "assign_pingpong.cake:42:29" in render(d, text)


def test_a_fixed_phase_on_a_wait_that_repeats_is_refused() -> None:
    text = PINGPONG.read_text().replace("      wait c_empty[s]\n", "      wait c_empty[s] phase 1\n")
    [d] = _e0411(text)
    assert "runs more than once on each element (once per tile of the persistent grid)" in d.message
    assert d.help and "drop `phase`" in d.help


def test_a_pipelined_loop_that_wraps_its_stages_repeats_its_waits() -> None:
    text = TCGEN05.replace("    wait done[s]\n", "    wait done[s] phase 0\n")
    [d] = _e0411(text)
    assert "once per STAGES iterations of the loop over `k`" in d.message


def test_phases_that_match_the_history_pass() -> None:
    assert _e0411(ONE_STEP) == []
    assert [d for d in check(parse(ONE_STEP, "t.cake")) if d.is_error] == []


def test_the_phase_before_the_first_completion_is_a_race() -> None:
    [d] = _e0411(ONE_STEP.replace("wait done[0] phase 0", "wait done[0] phase 1"))
    assert "it needs phase 0 (parity 0), the first completion of `done` by main" in d.message
    assert "passes before the arrivals it guards" in d.message
