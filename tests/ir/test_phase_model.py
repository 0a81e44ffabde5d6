"""E0411: an explicit `phase` is checked against the barrier's arrival history (what try_wait.parity does)."""

from __future__ import annotations

from pathlib import Path

from cake.ir.check import check
from cake.ir.checks.fixtures import TCGEN05
from cake.ir.parser import parse

from cake.diagnostics import render

PINGPONG = Path(__file__).parents[2] / "experiments" / "kmeans" / "assign_pingpong.cake"

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
    """The H200 hang (scripts/gpu_cuda_assign.py, case 5): the producer's first wait on the `free` ring
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


# ------------------------------------------------------------------------ two loops on one barrier ring

X2 = Path(__file__).parents[2] / "experiments" / "kmeans" / "assign_pingpong_x2.cake"


def _one_ring() -> str:
    """assign_pingpong_x2 with both centroid streams on one ring (`ca`): two sequential pipelined loops per
    role on the same barriers and buffers."""
    text = X2.read_text()
    for line in ("  smem cb[STAGES]: T[BK, D] swizzle 128B\n", "  smem csqb[STAGES]: f32[BK]\n",
                 "  mbarrier cb_full[STAGES] arrivals 1 tx BK*D*sizeof(T) + BK*4\n",
                 "  mbarrier cb_empty[STAGES] arrivals 2 free\n"):
        assert line in text
        text = text.replace(line, "")
    for old, new in (("cb_full", "ca_full"), ("cb_empty", "ca_empty"), ("cb[s]", "ca[s]"), ("csqb[s]", "csqa[s]")):
        text = text.replace(old, new)
    return text


def test_two_loops_on_one_ring_are_two_phase_sequences() -> None:
    text = _one_ring()
    kernel = parse(text, "one_ring.cake")
    assert [d.code for d in check(kernel, dims={"D": 128}) if d.is_error] == []
    from cake.ir import analysis as an

    launch = kernel.launches[1]
    uses = an.barrier_accounting(launch, an.default_env(kernel, {"D": 128, "K": 1000}))
    # STAGES = 2 elements; both consumers release each element once per phase, in each loop
    assert uses["ca_empty"].sequences == ((2, 2), (2, 2))
    box = 64 * 128 * 2 + 64 * 4  # BK x D f16 centroids + BK f32 norms
    assert uses["ca_full"].sequences == ((1, 1), (1, 1)) and uses["ca_full"].tx_sequences == ((box, box), (box, box))


def test_a_miscount_in_the_second_sequence_is_located() -> None:
    text = _one_ring()
    second = text.rindex("      arrive ca_empty[s]\n")
    text = text[:second] + "      arrive ca_empty[s]\n" + text[second:]  # the second loop releases twice
    [d] = [d for d in check(parse(text, "one_ring.cake"), dims={"D": 128}) if d.code == "E0402"]
    assert d.message == "arrival count of `ca_empty`: declared 2, but 4 arrive per phase"
    assert "in the second of 2 phase sequences on this barrier (one per loop over it)" in d.notes


def test_two_loops_on_one_ring_lower_to_cuda() -> None:
    from cake.lowering.runtime import lower

    lowered = lower(parse(_one_ring(), "one_ring.cake"), "cuda", params={"BK": 64})
    assert "ca_empty_phase" in lowered.source and "cb_empty" not in lowered.source
