"""The cost model's sanity properties, its counts on the anchor schedules, and calibration."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from cake.ir.cost import predict
from cake.ir.cost_calibration import (
    FACTOR_NAMES,
    Factors,
    constants_for,
    fit_factors,
    fit_factors_to,
    spearman,
    top_k_recall,
    top_k_regret,
)
from cake.ir.cost_timing import CostError, Occupancy, TermsBatch, Work, combine, quantize, terms
from cake.ir.nodes import DType
from cake.ir.parser import parse
from cake.ir.transforms.hold_operand import hold_operand
from hypothesis import given, settings
from hypothesis import strategies as st

from cake.arch import DEVICES

FK = Path(__file__).resolve().parents[2] / "experiments" / "kmeans"
PLAIN = parse((FK / "assign_plain.cake").read_text())
PINGPONG = parse((FK / "assign_pingpong.cake").read_text())
CELL = {"B": 32, "N": 65536, "K": 1024, "D": 128}
H200 = DEVICES["H200"]
CONSTS = constants_for("sm_90a")
# predictions of one and of two launches, plain and ping-pong, over a few params (the batch re-timing's fixture)
BATCHED = [predict(kernel, dims=CELL, params=params, factors=Factors(), backend=backend)
           for kernel, backend, params in [(PLAIN, "triton", {"BN": bn, "BK": bk}) for bn in (64, 128) for bk in (32, 64)]
           + [(PINGPONG, "cuda", {"STAGES": stages}) for stages in (2, 4)]
           + [(parse((FK / "assign_plain_norms.cake").read_text()), "triton", {})]]

work_st = st.builds(
    Work,
    tensor_flops=st.floats(0, 1e9), cuda_ops=st.floats(0, 1e8), global_bytes=st.floats(0, 1e7),
    store_bytes=st.floats(0, 1e6), smem_bytes=st.floats(0, 1e7), syncs=st.floats(0, 1e4),
    stage_bytes=st.floats(1, 1e6), stages=st.integers(1, 6),
)


def occ(ctas_per_sm: int, tiles: int, threads: int = 128, persistent: bool = False, regs: int = 128) -> Occupancy:
    busiest, resident = quantize(tiles, ctas_per_sm, H200.sm_count, persistent)
    return Occupancy(64 * 1024, regs, threads, ctas_per_sm, "smem", tiles, persistent, busiest, resident)


def time_of(work: Work, o: Occupancy, pingpong: bool = False) -> float:
    return combine(terms(work, o, H200, CONSTS, "bf16", pingpong), Factors())[0]


@settings(max_examples=200, deadline=None)
@given(work_st, st.integers(1, 8), st.integers(1, 5000), st.sampled_from(["global_bytes", "store_bytes", "smem_bytes"]),
       st.floats(1.0, 10.0))
def test_more_bytes_never_predicts_faster(work: Work, k: int, tiles: int, field: str, scale: float) -> None:
    o = occ(k, tiles)
    more = replace(work, **{field: getattr(work, field) * scale + 1.0})
    assert time_of(more, o) >= time_of(work, o) * (1 - 1e-12)


@settings(max_examples=200, deadline=None)
@given(work_st, st.integers(1, 8), st.integers(1, 5000), st.sampled_from(["tensor_flops", "cuda_ops", "syncs"]),
       st.floats(1.0, 10.0))
def test_more_work_never_predicts_faster(work: Work, k: int, tiles: int, field: str, scale: float) -> None:
    o = occ(k, tiles)
    more = replace(work, **{field: getattr(work, field) * scale + 1.0})
    assert time_of(more, o) >= time_of(work, o) * (1 - 1e-12)


@settings(max_examples=200, deadline=None)
@given(work_st, st.integers(1, 15), st.integers(1, 20000), st.booleans(), st.booleans())
def test_higher_occupancy_is_never_slower_all_else_equal(work: Work, k: int, tiles: int, persistent: bool,
                                                          pingpong: bool) -> None:
    assert time_of(work, occ(k + 1, tiles, persistent=persistent), pingpong) <= \
        time_of(work, occ(k, tiles, persistent=persistent), pingpong) * (1 + 1e-12)


@settings(max_examples=200, deadline=None)
@given(work_st, st.integers(1, 8), st.integers(1, 5000))
def test_pingpong_overlap_is_at_most_the_serial_sum(work: Work, k: int, tiles: int) -> None:
    o = occ(k, tiles)
    t_pp = terms(work, o, H200, CONSTS, "bf16", pingpong=True)
    t_plain = terms(work, o, H200, CONSTS, "bf16", pingpong=False)
    assert combine(t_pp, Factors())[0] <= combine(t_plain, Factors())[0] * (1 + 1e-12)
    serial = t_pp.tensor_s + t_pp.cuda_s + t_pp.smem_s + max(t_pp.l2_s, t_pp.hbm_s, t_pp.latency_s) + \
        t_pp.sync_s + t_pp.overhead_s
    assert combine(t_pp, Factors())[0] <= serial * (1 + 1e-12)


@pytest.mark.parametrize("persistent", [False, True])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_wave_quantization_is_a_monotone_step_function(persistent: bool, k: int) -> None:
    sms = H200.sm_count
    busiest = [quantize(t, k, sms, persistent)[0] for t in range(1, 6 * sms * k + 2)]
    assert all(a <= b for a, b in zip(busiest, busiest[1:], strict=False))
    if not persistent:  # flat within each wave of SM-count tiles, a step at each multiple
        for j in range(5):
            assert len({quantize(t, k, sms, False)[0] for t in range(j * sms + 1, (j + 1) * sms + 1)}) == 1
            assert quantize((j + 1) * sms + 1, k, sms, False)[0] == quantize((j + 1) * sms, k, sms, False)[0] + 1


@pytest.mark.parametrize("kernel", [PLAIN, PINGPONG], ids=["plain", "pingpong"])
def test_a_deeper_pipeline_never_predicts_less_shared_memory(kernel) -> None:  # type: ignore[no-untyped-def]
    smem = []
    domain = kernel.param("STAGES").domain
    for stages in range(domain.start, domain.stop):
        try:
            p = predict(kernel, dims=CELL, params={"STAGES": stages}, factors=Factors())
        except CostError as error:  # past the SM's shared memory: deeper ones cannot fit either
            assert "does not fit" in str(error)
            break
        smem.append(max(lp.occupancy.smem_bytes_per_cta for lp in p.launches))
    assert len(smem) >= 3 and smem == sorted(smem) and smem[0] < smem[-1]


def test_larger_problem_never_predicts_faster_on_the_ir() -> None:
    times = [predict(PLAIN, dims={**CELL, "N": n}, factors=Factors()).time_s for n in (1024, 4096, 65536, 262144)]
    assert times == sorted(times)
    assert predict(PLAIN, dims={**CELL, "D": 64}, factors=Factors()).time_s <= predict(PLAIN, dims=CELL, factors=Factors()).time_s


def test_counts_on_the_plain_schedule_are_exact() -> None:
    p = predict(PLAIN, dims=CELL, dtype=DType.BF16, factors=Factors())
    (lp,) = p.launches
    bn, bk, d, k = 128, 64, 128, 1024
    assert lp.occupancy.tiles == 32 * 65536 // bn
    assert lp.work.tensor_flops == pytest.approx(2 * bn * k * d)  # dot lowers to wgmma at full rate here
    x_bytes, c_bytes = bn * d * 2, k * d * 2
    assert lp.work.global_bytes == pytest.approx(x_bytes + c_bytes)
    assert lp.work.store_bytes == pytest.approx(bn * 4)
    assert lp.work.stages == 2 and lp.work.stage_bytes == pytest.approx(bk * d * 2)
    # Triton stages the x tile and the pipelined c tiles in shared memory, one buffer fewer than the stages (its
    # pipeliner prefetches stages - 1 iterations ahead): at 2 stages, one c tile
    assert constants_for("sm_90a", "triton").pipelined_load_buffers_below_stages == 1
    assert lp.occupancy.smem_bytes_per_cta == (2 - 1) * bk * d * 2 + bn * d * 2


def test_pingpong_uses_declared_smem_and_registers_and_overlaps() -> None:
    p = predict(PINGPONG, dims=CELL, factors=Factors())
    assign = next(lp for lp in p.launches if lp.launch == "assign")
    assert assign.pingpong and assign.occupancy.persistent
    assert assign.occupancy.regs_per_thread == (128 * 40 + 2 * 128 * 232) // 384
    assert assign.occupancy.smem_bytes_per_cta > 2 * 128 * 128 * 2 + 4 * (128 * 128 * 2 + 128 * 4)
    # CHAIN: each consumer's iteration chain includes issuing its own mma and epilogue (warp issue), which the
    # ping-pong overlaps across the two consumers but cannot shorten
    assert p.bound.name in {"TENSOR", "CUDA_CORE", "SMEM", "HBM", "L2", "CHAIN"}


def test_a_launch_that_does_not_fit_is_a_cost_error() -> None:
    with pytest.raises(CostError, match="does not fit"):
        predict(PINGPONG, dims={**CELL, "D": 512}, factors=Factors())
    with pytest.raises(CostError, match="needs a value"):
        predict(PLAIN, dims={"B": 1, "N": 10, "K": 3}, factors=Factors())


def test_rank_statistics() -> None:
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert top_k_recall([1, 2, 3, 4, 5], [1, 2, 5, 4, 3], 2) == 1.0
    assert top_k_recall([5, 4, 3, 2, 1], [1, 2, 3, 4, 5], 2) == 0.0
    # A near-tie the model orders wrongly is a recall miss but almost no regret.
    assert top_k_recall([2, 1, 3], [1.00, 1.01, 2.0], 1) == 0.0
    assert top_k_regret([2, 1, 3], [1.00, 1.01, 2.0], 1) == pytest.approx(0.01)
    assert top_k_regret([5, 4, 3, 2, 1], [1, 2, 3, 4, 5], 2) == pytest.approx(3.0)
    assert top_k_regret([1, 2, 3], [1, 2, 3], 5) == 0.0
    with pytest.raises(ValueError, match="at least one"):
        top_k_regret([], [], 5)


def test_fit_recovers_a_planted_factor() -> None:
    base = [(1.0, 0.1), (0.2, 1.0), (0.5, 0.5), (2.0, 0.3)]

    def model(f: Factors) -> list[float]:
        return [t * f.tensor + c * f.cuda for t, c in base]

    measured = model(Factors(tensor=2.0, cuda=0.5))
    fit = fit_factors(model, measured, regularization=0.0)
    assert fit.factors.tensor == pytest.approx(2.0, rel=1e-3) and fit.factors.cuda == pytest.approx(0.5, rel=1e-3)
    assert fit.at_bound == () and fit.warning() is None
    assert "sync" in fit.inert  # its term is not in this model: left at 1.0 and said so


def test_fit_flags_factors_that_run_to_a_bound() -> None:
    # Units that disagree (seconds predicted, milliseconds measured) need every factor x1000: the fit must say
    # that it hit the bounds rather than quietly return them (what the first H200 run's fit did).
    base = [(1.0, 0.1), (0.2, 1.0), (0.5, 0.5)]

    def model(f: Factors) -> list[float]:
        return [t * f.tensor + c * f.cuda for t, c in base]

    fit = fit_factors(model, [1000.0 * m for m in model(Factors())], bounds=(0.125, 8.0))
    assert set(fit.at_bound) == {"tensor", "cuda", "level"}
    assert fit.level == pytest.approx(8.0) and fit.factors.tensor == pytest.approx(64.0)
    assert "level" in (fit.warning() or "")
    plain = fit_factors(model, [1000.0 * m for m in model(Factors())], bounds=(0.125, 8.0), free_level=False)
    assert set(plain.at_bound) == {"tensor", "cuda"} and plain.factors.tensor == pytest.approx(8.0)


def test_the_free_level_scales_every_factor_and_leaves_the_ranking_terms_alone() -> None:
    # Measured = 3x the model with the cuda term 2x. The level carries the common scale, so the regularized
    # factors only move apart by the 2x (tensor x0.5 and cuda x1, or x1 and x2, cost the same), and the
    # factors returned (level folded in) reproduce the measurements.
    base = [(1.0, 0.1), (0.2, 1.0), (0.5, 0.5), (2.0, 0.3)]

    def model(f: Factors) -> list[float]:
        return [t * f.tensor + c * f.cuda for t, c in base]

    fit = fit_factors(model, [3.0 * m for m in model(Factors(cuda=2.0))], regularization=1e-4)
    assert fit.factors.tensor == pytest.approx(3.0, rel=0.02) and fit.factors.cuda == pytest.approx(6.0, rel=0.02)
    assert 3.0 * 0.98 <= fit.level <= 6.0 * 1.02 and fit.rms_log_error < 1e-3
    assert not fit.at_bound
    # Without the level the same data needs both factors moved, each paying the regularization.
    plain = fit_factors(model, [3.0 * m for m in model(Factors(cuda=2.0))], regularization=1e-4, free_level=False)
    assert plain.level == 1.0


def test_regularization_pulls_toward_one() -> None:
    base = [(1.0, 0.1), (0.2, 1.0), (0.5, 0.5), (2.0, 0.3)]

    def model(f: Factors) -> list[float]:
        return [t * f.tensor + c * f.cuda for t, c in base]

    measured = model(Factors(tensor=2.0))
    loose = fit_factors(model, measured, regularization=0.0).factors.tensor
    tight = fit_factors(model, measured, regularization=1.0).factors.tensor
    assert 1.0 <= tight < loose


def test_more_accumulator_per_thread_never_predicts_fewer_registers_and_spills_are_priced() -> None:
    def at(**params: int):  # type: ignore[no-untyped-def]
        return predict(PLAIN, dims=CELL, dtype=DType.BF16, params=params, factors=Factors()).launches[0]

    small, big = at(BN=128, BK=64, WARPS=2, STAGES=1), at(BN=128, BK=128, WARPS=2, STAGES=1)
    assert big.occupancy.regs_per_thread >= small.occupancy.regs_per_thread
    assert small.occupancy.spilled_regs == 0 and small.terms.spill_s == 0
    assert big.occupancy.spilled_regs > 0 and big.bound.name == "SPILL" and big.time_s > 10 * small.time_s
    # the same accumulator over twice the threads fits: no spill
    assert at(BN=128, BK=128, WARPS=4, STAGES=1).occupancy.spilled_regs == 0


def test_a_swizzled_stage_read_elementwise_costs_cuda_core_issue() -> None:
    """On the H200 a ping-pong whose consumers recompute ||c||^2 from each centroid stage ran 3x slower
    than the one with the norms hoisted (RESULTS.md, session 2): those reads are CUDA-core work, while the
    wgmma operands stream from shared memory without it."""
    text = (FK / "assign_pingpong.cake").read_text()
    in_loop = parse(text.replace("let cn: f32[BK] = csq[s]",
                                 "let cn: f32[BK] = sum(cast(cs[s], f32) * cast(cs[s], f32), axis=1)"))
    hoisted = predict(PINGPONG, dims=CELL, factors=Factors())
    redone = predict(in_loop, dims=CELL, factors=Factors())
    extra = redone.launches[-1].work.cuda_ops - hoisted.launches[-1].work.cuda_ops
    stage_reads = 2 * 2 * 128 * 128 * (1024 // 128)  # 2 consumers x 2 reads of a [BK, D] stage per k-step
    assert extra >= stage_reads * CONSTS.smem_elementwise_ops_per_element
    assert redone.time_ms > 1.3 * hoisted.time_ms


MATMUL = (Path(__file__).resolve().parents[1] / "lowering" / "fixtures" / "matmul_cp_async.cake").read_text()


def test_an_fp32_dot_is_priced_where_its_precision_runs() -> None:
    # `via dot` on fp32 operands is IEEE on the CUDA cores (one FMA a multiply-add); `dot.tf32` and `dot.tf32x3`
    # are one and three TF32 tensor-core products (cake.ir.dot_forms.TF32_PRODUCTS); on 16-bit operands the
    # suffix changes nothing
    dims = {"M": 256, "N": 256, "K": 256}
    macs = 32 * 32 * 256  # one tile's multiply-adds at the defaults (BM = BN = 32, all of K)

    def work(suffix: str, dtype: DType) -> Work:
        text = MATMUL.replace("via dot", f"via dot{'.' + suffix if suffix else ''}")
        (launch,) = predict(parse(text), dims=dims, dtype=dtype, factors=Factors()).launches
        return launch.work

    ieee, one, three = (work(s, DType.F32) for s in ("", "tf32", "tf32x3"))
    assert ieee.tensor_flops == ieee.tf32_flops == 0 and ieee.cuda_ops >= macs
    assert one.tensor_flops == three.tensor_flops == 0 and one.tf32_flops > 0
    assert three.tf32_flops == pytest.approx(3 * one.tf32_flops)
    assert one.cuda_ops == pytest.approx(ieee.cuda_ops - macs)
    assert len({work(s, DType.BF16) for s in ("", "tf32", "tf32x3")}) == 1
    times = [predict(parse(MATMUL.replace("via dot", f"via dot.{s}")), dims=dims, dtype=DType.F32,
                     factors=Factors()).time_s for s in ("tf32", "tf32x3")]
    assert times[0] <= times[1]


def test_a_held_wgmma_a_operand_is_read_once_not_per_instruction() -> None:
    # hold_operand on the ping-pong: the products read only the centroid stage from shared memory; the point
    # stage is read once at its `let` (ldmatrix, priced as the tensor-core path's bytes, not element by element).
    pingpong = parse((FK / "assign_pingpong.cake").read_text())
    held = hold_operand(pingpong)
    assert held is not None
    dims = {"B": 32, "N": 65536, "K": 1024, "D": 128}
    before, after = (predict(k, dims=dims, backend="cuda").launches[-1].work for k in (pingpong, held))
    assert after.cuda_ops == before.cuda_ops
    # per 256-point tile: 2 consumers x 8 k-tiles x 2 x 8 wgmma of A [64, 16] re-read from shared memory
    # (64 KB per consumer and k-tile), less one read of each consumer's [128, 128] stage (32 KB)
    assert before.smem_bytes - after.smem_bytes == 2 * (8 * 128 * 128 * 2 - 128 * 128 * 2)


def test_a_pingpong_pipelines_its_centroid_ring_not_the_point_tiles_it_copies_once() -> None:
    # The producer copies each consumer's [128, 128] point tile once (32 KB an iteration, not pipelined) and the
    # centroid ring stage by stage ([128, 128] + norms, 8 iterations a tile): the ring moves the most bytes in all,
    # so its depth is what is in flight. Session 20's seed 8 timed STAGES 1 -> 3 on a ping-pong 16% faster, while the
    # model, pricing the point copies' depth of 1, predicted the same time for both.
    assign = [predict(PINGPONG, dims=CELL, params={"STAGES": s}, backend="cuda").launches[-1] for s in (1, 2, 4)]
    assert [lp.work.stages for lp in assign] == [1, 2, 4]
    assert all(lp.work.stage_bytes == 128 * 128 * 2 + 128 * 4 for lp in assign)
    assert assign[0].time_s > assign[1].time_s > assign[2].time_s


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0.0625, 16.0), min_size=len(FACTOR_NAMES), max_size=len(FACTOR_NAMES)))
def test_the_batch_retiming_is_the_overlap_rule_of_each_prediction(values: list[float]) -> None:
    """`fit_factors_to` re-times every prediction at once (`TermsBatch`); it must be `Prediction.retimed`, term for
    term, or a calibration fits a different model from the one that ranks."""
    factors = Factors(**dict(zip(FACTOR_NAMES, values, strict=True)))
    batch = TermsBatch.of([[lp.terms for lp in p.launches] for p in BATCHED])
    assert batch.totals(factors).tolist() == pytest.approx([p.retimed(factors) for p in BATCHED], rel=1e-12)


def test_fitting_factors_to_predictions_is_the_fit_of_their_one_by_one_retiming() -> None:
    measured = [p.retimed(Factors(tensor=2.0, smem=0.5, chain=1.5)) for p in BATCHED]
    one_by_one = fit_factors(lambda f: [p.retimed(f) for p in BATCHED], measured)
    assert fit_factors_to(BATCHED, measured).factors == one_by_one.factors
