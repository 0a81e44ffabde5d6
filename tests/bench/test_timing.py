"""The timing protocol's logic on a CPU, driven by a scripted clock that exists only in this test.

No test here asserts on a real time: the "times" are the script's, and what is checked is the protocol's
behaviour around them (order, refusal, re-checks, flags, the wall-clock guard).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from cake.verifier.gates.resources import roofline_floor_s
from cake.verifier.registry import get_contract
from cake.verifier.timing import (
    Contestant,
    NoGpu,
    Samples,
    TimingConfig,
    Unverified,
    Verification,
    input_set_bytes,
    measure,
    pool_size,
    spot_check,
    summarize,
)

from cake.arch import DEVICES, match_device, ranking_device

PASSED = Verification(True, "battery", "all gates passed")


class ScriptedClock:
    """Device time advances only when a scripted kernel says so; every action is logged."""

    def __init__(self, wall_per_read: float = 0.0):
        self.now = 0.0
        self.log: list[str] = []
        self.wall = 0.0
        self.wall_per_read = wall_per_read

    def record(self) -> object:
        return self.now

    def elapsed_ms(self, start: object, end: object) -> float:
        assert isinstance(start, float) and isinstance(end, float)
        return end - start

    def wait(self, mark: object) -> None:
        self.log.append("wait")

    def synchronize(self) -> None:
        self.log.append("sync")

    def flush_l2(self) -> None:
        self.log.append("flush")

    def wall_s(self) -> float:
        self.wall += self.wall_per_read
        return self.wall


def kernel(clock: ScriptedClock, name: str, ms: float | Callable[[int], float],
           result: Callable[[int, Any], Any] | None = None) -> Callable[..., Any]:
    """A fake kernel: logs `name:set`, advances the clock, returns `result(call, x)` (default: x + 1)."""
    calls = [0]

    def run(x: torch.Tensor) -> torch.Tensor:
        calls[0] += 1
        clock.log.append(f"{name}:{int(x[0])}")
        clock.now += ms(calls[0]) if callable(ms) else ms
        return result(calls[0], x) if result is not None else x + 1

    return run


def plus_one(inputs: tuple[Any, ...], outputs: tuple[torch.Tensor, ...]) -> str | None:
    return None if torch.equal(outputs[0], inputs[0] + 1) else "not x + 1"


SETS = [(torch.tensor([float(i)]),) for i in range(3)]


def test_candidate_and_baseline_are_interleaved_abab_with_a_flush_before_every_call() -> None:
    clock = ScriptedClock()
    a = Contestant("A", kernel(clock, "A", 1.0), verification=PASSED)
    b = Contestant("B", kernel(clock, "B", 2.0), candidate=False)
    config = TimingConfig(warmup_calls=1, min_reps=4, max_reps=4, sync_every=2)
    samples = measure([a, b], SETS, clock, plus_one, config)
    timed = clock.log[clock.log.index("flush") - 0:]
    calls = [e for e in timed if ":" in e]
    assert calls == ["A:0", "B:0", "A:1", "B:1", "A:2", "B:2", "A:0", "B:0"]
    # every timed call is preceded by its own flush
    for i, entry in enumerate(timed):
        if ":" in entry:
            assert timed[i - 1] == "flush"
    assert samples[0].times_ms == (1.0,) * 4 and samples[1].times_ms == (2.0,) * 4


def test_first_calls_compile_and_check_each_input_set_before_timing() -> None:
    clock = ScriptedClock()
    a = Contestant("A", kernel(clock, "A", 1.0), verification=PASSED)
    measure([a], SETS, clock, plus_one, TimingConfig(warmup_calls=2, min_reps=1, max_reps=1, sync_every=1))
    before = clock.log[: clock.log.index("flush")]
    assert [e for e in before if ":" in e] == ["A:0", "A:1", "A:2", "A:0", "A:0"]  # check x3, warm-up x2


def test_unverified_candidate_is_refused_before_anything_runs() -> None:
    clock = ScriptedClock()
    for verification in (None, Verification(False, "battery", "CMP-01 failed")):
        c = Contestant("C", kernel(clock, "C", 1.0), verification=verification)
        with pytest.raises(Unverified, match="has not passed"):
            measure([c], SETS, clock, plus_one)
    assert clock.log == []


def test_baselines_need_no_verification_but_are_checked() -> None:
    clock = ScriptedClock()
    wrong = Contestant("W", kernel(clock, "W", 1.0, result=lambda call, x: x), candidate=False)
    good = Contestant("G", kernel(clock, "G", 1.0), verification=PASSED)
    samples = measure([wrong, good], SETS, clock, plus_one, TimingConfig(min_reps=2, max_reps=2))
    assert samples[0].failure is not None and samples[0].failure.startswith("wrong before timing")
    assert samples[0].times_ms == () and not samples[0].ok
    assert samples[1].ok and len(samples[1].times_ms) == 2
    assert not any(e.startswith("W:") for e in clock.log[clock.log.index("flush"):])


def test_a_kernel_that_goes_wrong_once_warm_fails_the_recheck_and_loses_its_times() -> None:
    clock = ScriptedClock()
    # correct for its first 5 calls (3 checks + 2 warm-up), then returns its input unchanged
    lazy = kernel(clock, "L", 0.01, result=lambda call, x: x + 1 if call <= 5 else x)
    samples = measure([Contestant("L", lazy, verification=PASSED)], SETS, clock, plus_one,
                      TimingConfig(warmup_calls=2, min_reps=6, max_reps=6))
    assert samples[0].failure is not None and samples[0].failure.startswith("wrong after timing")
    assert samples[0].times_ms == ()


def test_wall_clock_guard_stops_after_min_reps() -> None:
    clock = ScriptedClock(wall_per_read=10.0)  # every guard read is 10 s later
    a = Contestant("A", kernel(clock, "A", 1.0), verification=PASSED)
    samples = measure([a], SETS, clock, plus_one,
                      TimingConfig(warmup_calls=0, min_reps=4, max_reps=1000, max_wall_s=5.0, sync_every=2))
    assert len(samples[0].times_ms) == 4


def test_a_baseline_that_cannot_be_the_best_leaves_the_rotation_but_keeps_its_samples_and_recheck() -> None:
    clock = ScriptedClock()
    candidate = Contestant("C", kernel(clock, "C", 5.0), verification=PASSED)  # slower than all: never retired
    fast = Contestant("F", kernel(clock, "F", 1.0), candidate=False)
    close = Contestant("N", kernel(clock, "N", 2.5), candidate=False)  # within 3x of the fastest baseline
    slow = Contestant("S", kernel(clock, "S", 20.0), candidate=False)  # 20x the fastest baseline
    config = TimingConfig(warmup_calls=0, min_reps=4, max_reps=12, sync_every=2, retire_ratio=3.0)
    samples = measure([candidate, fast, close, slow], SETS, clock, plus_one, config)
    assert [len(s.times_ms) for s in samples[:3]] == [12, 12, 12]
    # retired at the first read of min_reps of its samples (reps 0-3, read at rep 6); reps 4-5, queued, are kept
    assert samples[3].failure is None and len(samples[3].times_ms) == 6
    # correct for its 3 checks and 2 timed calls, then wrong: retired, it is still re-checked
    wrong = Contestant("S", kernel(clock, "S", 20.0, result=lambda call, x: x + 1 if call <= 5 else x), candidate=False)
    again = measure([candidate, fast, wrong], SETS, clock, plus_one, config)
    assert again[2].failure is not None and again[2].failure.startswith("wrong after timing")
    # without a ratio every contestant runs every rep
    slow = Contestant("S", kernel(clock, "S", 20.0), candidate=False)
    everyone = measure([candidate, fast, slow], SETS, clock, plus_one, TimingConfig(warmup_calls=0, min_reps=4,
                                                                                    max_reps=12, sync_every=2))
    assert all(len(s.times_ms) == 12 for s in everyone)


class QueueClock:
    """A host that queues work on a device that runs it in order: a call costs the host `host_ms` to launch and
    the device `gpu_ms` from when both the launch and the work before it are done. A mark is the device time it is
    reached at; waiting moves the host to it."""

    FLUSH_MS = 0.03

    def __init__(self) -> None:
        self.host = 0.0
        self.device = 0.0

    def record(self) -> object:
        self.device = max(self.device, self.host)
        return self.device

    def elapsed_ms(self, start: object, end: object) -> float:
        assert isinstance(start, float) and isinstance(end, float)
        return end - start

    def wait(self, mark: object) -> None:
        assert isinstance(mark, float)
        self.host = max(self.host, mark)

    def synchronize(self) -> None:
        self.host = max(self.host, self.device)

    def flush_l2(self) -> None:
        self.device = max(self.device, self.host) + self.FLUSH_MS

    def wall_s(self) -> float:
        return self.host * 1e-3

    def call(self, host_ms: float, gpu_ms: float) -> Callable[..., Any]:
        def run(x: torch.Tensor) -> torch.Tensor:
            self.host += host_ms
            self.device = max(self.device, self.host) + gpu_ms
            return x + 1
        return run


def test_no_timed_call_starts_on_an_idle_device_so_none_carries_its_host_launch() -> None:
    # The candidate's launch takes the host half its device time, far longer than the L2 flush before it: a call
    # queued on a drained device would be timed from its start mark through its launch (1.47 ms, not 1.0).
    clock = QueueClock()
    candidate = Contestant("C", clock.call(host_ms=0.5, gpu_ms=1.0), verification=PASSED)
    baseline = Contestant("B", clock.call(host_ms=0.05, gpu_ms=1.2), candidate=False)
    config = TimingConfig(warmup_calls=3, min_reps=10, max_reps=40, sync_every=8)
    samples = measure([candidate, baseline], SETS, clock, plus_one, config)
    assert samples[0].times_ms == pytest.approx((1.0,) * 40) and samples[1].times_ms == pytest.approx((1.2,) * 40)


def test_median_and_quantiles_are_of_the_scripted_times() -> None:
    clock = ScriptedClock()
    times = [5.0, 1.0, 3.0, 2.0, 4.0]
    script = kernel(clock, "A", lambda call: times[(call - 6) % 5] if call > 5 else 0.0)
    samples = measure([Contestant("A", script, verification=PASSED)], SETS, clock, plus_one,
                      TimingConfig(warmup_calls=2, min_reps=5, max_reps=5, sync_every=5))
    assert sorted(samples[0].times_ms) == sorted(times)
    assert samples[0].median_ms == 3.0 and samples[0].quantile_ms(0.0) == 1.0 and samples[0].quantile_ms(1.0) == 5.0


ASSIGN = get_contract("kmeans_assign")
CELL = {"B": 32, "N": 65536, "K": 1024, "D": 128}
H200 = DEVICES["H200"]


def test_a_time_below_the_roofline_floor_is_flagged_implausible() -> None:
    floor_ms = roofline_floor_s(ASSIGN, CELL, torch.bfloat16, H200) * 1e3
    fast = summarize(Samples("C", True, (floor_ms * 0.5,) * 3), ASSIGN, CELL, torch.bfloat16, H200)
    fine = summarize(Samples("C", True, (floor_ms * 2.0,) * 3), ASSIGN, CELL, torch.bfloat16, H200, reference_ms=4 * floor_ms)
    assert fast.implausible and not fine.implausible
    assert fine.speedup == pytest.approx(2.0)
    assert fine.floor_ms == pytest.approx(floor_ms)
    assert fine.tflops == pytest.approx(ASSIGN.flops(CELL) / (2 * floor_ms * 1e-3) / 1e12)
    assert fine.frac_gemm_ceiling == pytest.approx(fine.tflops / H200.gemm_ceiling_tflops)


def test_an_untimed_contestant_reports_no_numbers() -> None:
    m = summarize(Samples("C", True, (), "wrong after timing: x"), ASSIGN, CELL, torch.bfloat16, H200)
    assert m.median_ms is None and m.tflops is None and m.speedup is None and m.failure


def test_pool_holds_more_than_the_l2_within_budget() -> None:
    cell_set = input_set_bytes(ASSIGN, CELL, torch.bfloat16)
    assert cell_set == 32 * (65536 + 1024) * 128 * 2
    assert pool_size(cell_set, H200.l2_bytes) == 2  # one set is far over the L2 already
    small = 1 << 20
    n = pool_size(small, H200.l2_bytes)
    assert n * small > 2 * H200.l2_bytes or n == 8
    assert pool_size(3 << 30, H200.l2_bytes, max_pool_bytes=4 << 30) == 2


def test_spot_check_samples_the_fp64_reference() -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, 300, 16, generator=gen)
    c = torch.randn(3, 11, 16, generator=gen)
    ids = torch.cdist(x.double(), c.double()).argmin(-1)
    check = spot_check(ASSIGN, torch.float32, {"B": 2, "N": 64})
    assert check((x, c), (ids,)) is None
    wrong = ids.clone()
    wrong[:, :] = (ids + 1) % 11
    assert check((x, c), (wrong,)) is not None


def test_device_names_map_to_the_arch_table() -> None:
    assert match_device("NVIDIA H200").name == "H200"  # type: ignore[union-attr]
    assert match_device("NVIDIA H100 80GB HBM3").name == "H100-SXM5"  # type: ignore[union-attr]
    assert match_device("NVIDIA A100-SXM4-80GB").name == "A100-SXM4-80GB"  # type: ignore[union-attr]
    assert match_device("Some Other GPU") is None


def test_a_search_ranks_for_the_gpu_present_and_says_why_otherwise() -> None:
    h100, why = ranking_device("sm_90a", "NVIDIA H100 80GB HBM3")
    assert h100 is DEVICES["H100-SXM5"] and "NVIDIA H100 80GB HBM3" in why
    cpu, why = ranking_device("sm_90a", None)
    assert cpu is DEVICES["H200"] and "no GPU" in why
    unknown, why = ranking_device("sm_90a", "Some Other GPU")
    assert unknown is DEVICES["H200"] and "Some Other GPU" in why and "DEVICES" in why


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU refusal")
def test_no_gpu_means_no_clock() -> None:
    from cake.verifier.timing import CudaClock

    with pytest.raises(NoGpu):
        CudaClock()


def test_the_spot_checks_reference_is_computed_once_per_input_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """measure() checks every contestant on every set before and after timing: 4 x sets checks with two
    contestants, one fp64 reference per set. A wrong output is still caught against the reused reference."""
    import cake.verifier.timing as timing

    computed: list[int] = []
    real = timing.expected_from

    def counting(*args: Any, **kwargs: Any) -> Any:
        computed.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(timing, "expected_from", counting)
    contract = get_contract("matmul")
    sets = [timing.make_inputs(contract, {"M": 8, "N": 8, "K": 8}, torch.float32, "cpu", seed) for seed in (0, 1)]
    check = spot_check(contract, torch.float32, {"M": 4})
    for _ in range(4):  # two contestants, before and after
        for inputs in sets:
            assert check(inputs, (inputs[0] @ inputs[1],)) is None
    assert len(computed) == 2
    assert check(sets[0], (sets[0][0] @ sets[0][1] + 1.0,)) is not None and len(computed) == 2
