"""The offline agent's repair of register refusals on a setmaxnreg kernel: the register file is re-split (the tiles
and stages the operator chose are kept), where stepping tiles down cannot help (session 21's GPU seeds refused 22
children with E0302 after moving a register budget up, each "repaired" by shrinking tiles and stages); where it
cannot, every way out is walked and the model picks (session 32's seed 24)."""

from __future__ import annotations

import random

from cake.agents.base import TurnContext
from cake.agents.mutations import Mutation, mutate_hold, with_param_default
from cake.agents.offline import OfflineAgent, repair_steps
from cake.agents.validation import make_validator
from cake.experiments.workload import get_workload
from cake.ir import nodes as n
from cake.ir.parser import parse
from cake.ir.printer import print_kernel
from cake.ir.transforms import apply
from cake.ir.transforms.bind_params import bind_params
from cake.ir.transforms.fit_consumer_regs import fit_consumer_regs
from cake.ir.transforms.warp_specialize import warp_specialize
from conftest import SEED, seed_parent

from cake.diagnostics import Diagnostic
from cake.runs.store import ir_hash

DIMS = get_workload("flash_kmeans").fitness_shape("kmeans_assign").dim_map
VALIDATE = make_validator("sm_90a", "cuda", dims=DIMS)


def _specialized(**values: int) -> n.Kernel:
    kernel = warp_specialize(parse(SEED.read_text()))
    assert kernel is not None
    return apply(fit_consumer_regs, bind_params(kernel, values))


def _regs(kernel: n.Kernel) -> dict[str, int]:
    return {p.name: p.default for p in kernel.params if p.name.endswith("_REGS")}


def _repaired(kernel: n.Kernel, code: str) -> n.Kernel:
    checked = VALIDATE(print_kernel(kernel))
    assert {d.code for d in checked.errors} == {code}, [d.message for d in checked.errors]
    assert checked.kernel is not None
    fixed = next(iter(repair_steps(checked.kernel, checked.errors)), None)
    assert fixed is not None and fixed.description == f"registers re-split ({code})"
    assert VALIDATE(print_kernel(fixed.kernel)).ok
    return fixed.kernel


def test_a_budget_moved_over_the_file_is_repaired_by_refitting_the_consumers() -> None:
    start = _specialized(PRODUCER_REGS=24, BN=128, BK=64)
    assert _regs(start) == {"PRODUCER_REGS": 24, "CONSUMER_REGS": 240}
    over = with_param_default(start, "PRODUCER_REGS", 32)  # 128 x 32 + 256 x 240 > the file
    fixed = _repaired(over, "E0302")
    assert _regs(fixed) == {"PRODUCER_REGS": 32, "CONSUMER_REGS": 232}
    assert {p.name: p.default for p in fixed.params if p.name in ("BN", "BK")} == {"BN": 128, "BK": 64}


def test_an_accumulator_short_of_registers_takes_the_copy_roles_idle_ones() -> None:
    # three consumers beside a 248-register producer are left 88 registers each; the 128 x 128 accumulator needs 128
    short = _specialized(PRODUCER_REGS=248, CONSUMERS=3, BN=128, BK=128)
    assert _regs(short) == {"PRODUCER_REGS": 248, "CONSUMER_REGS": 88}
    fixed = _repaired(short, "E0307")
    assert _regs(fixed) == {"PRODUCER_REGS": 24, "CONSUMER_REGS": 160}


def test_other_refusals_still_shrink() -> None:
    start = _specialized(PRODUCER_REGS=24, STAGES=4)
    refusal = Diagnostic("E0301", "shared memory over budget in launch `main`", subject="shared buffer `ct_s`")
    steps = repair_steps(start, (refusal,))
    assert steps
    for fixed in steps:
        assert fixed is not None and "registers" not in fixed.description
        assert any(p.default < q.default for p, q in zip(fixed.kernel.params, start.params, strict=True))
    # a register refusal beside another kind of error is not only a register split: it shrinks too
    mixed = (Diagnostic("E0302", "register file over budget"), refusal)
    fixed = next(iter(repair_steps(_specialized(PRODUCER_REGS=24), mixed)), None)
    assert fixed is not None and "registers" not in fixed.description


def test_an_accumulator_short_of_registers_takes_what_the_file_leaves_where_the_copy_roles_hold_none() -> None:
    # a move that lowered the consumers' budget below the file's share, beside a producer already at the floor
    short = with_param_default(_specialized(PRODUCER_REGS=24, CONSUMERS=3, BN=128, BK=128), "CONSUMER_REGS", 112)
    fixed = _repaired(short, "E0307")
    assert _regs(fixed) == {"PRODUCER_REGS": 24, "CONSUMER_REGS": 160}


def _stepped(before: n.Kernel, after: n.Kernel) -> set[str]:
    return {p.name for p, q in zip(before.params, after.params, strict=True) if p.default != q.default}


def test_an_accumulator_no_split_can_hold_steps_down_what_sizes_it() -> None:
    # session 32's seed 24: four consumers at the file's share (112) cannot hold a 128 x 128 accumulator, and the
    # repair stepped stages or the norm warps as often as anything, or took BN back, so no BN 128 child was legal
    short = _specialized(PRODUCER_REGS=24, CONSUMERS=4, BN=128, BK=128)
    checked = VALIDATE(print_kernel(short))
    assert {d.code for d in checked.errors} == {"E0307"} and checked.kernel is not None
    steps = {}
    for fixed in repair_steps(checked.kernel, checked.errors):
        assert fixed is not None
        steps[frozenset(_stepped(checked.kernel, fixed.kernel))] = fixed.kernel
    # the accumulator's rows and columns, and the consumers sharing the file: never stages or other warps
    assert set(steps) == {frozenset({"BN"}), frozenset({"BK"}), frozenset({"CONSUMERS"})}
    # with a consumer fewer, the next round gives the rest its registers and the tile stays as the move chose it
    fewer = steps[frozenset({"CONSUMERS"})]
    fixed_kernel = _repaired(fewer, "E0307")
    assert _regs(fixed_kernel) == {"PRODUCER_REGS": 24, "CONSUMER_REGS": 160}
    assert {p.name: p.default for p in fixed_kernel.params if p.name in ("BN", "BK")} == {"BN": 128, "BK": 128}


def _tile_and_split(kernel: n.Kernel) -> tuple[int, ...]:
    params = {p.name: p.default for p in kernel.params}
    return tuple(params[name] for name in ("BN", "BK", "CONSUMERS", "PRODUCER_REGS", "CONSUMER_REGS"))


def _held_refused() -> tuple[Mutation, object]:
    # session 32's seed 24: warp_specialize drew 4 consumers of 128-row tiles at 72/96 registers; holding the point
    # tile in registers then needs 64 for it beside the 64 of the accumulator, and 4 consumers can have 112 at most
    drawn = _specialized(PRODUCER_REGS=72, CONSUMERS=4, BN=128, BK=64, CONSUMER_REGS=96)
    held = mutate_hold(drawn, random.Random(0))
    assert held is not None
    checked = VALIDATE(print_kernel(held.kernel))
    assert {d.code for d in checked.errors} == {"E0307"}
    return held, checked


def _ctx(predict: object) -> TurnContext:
    return TurnContext(turn=1, op="kmeans_assign", arch="sm_90a", n=4, parents=(seed_parent(),), failures=(),
                       seen_hashes=frozenset(), rng=random.Random(0), validate=VALIDATE, backend="cuda",
                       predict=predict)  # type: ignore[arg-type]


def test_a_refusal_with_several_ways_out_proposes_the_fastest_priced() -> None:
    held, checked = _held_refused()

    def larger_tiles_first(kernel: n.Kernel) -> float:  # a stand-in price: the most accumulator elements
        params = {p.name: p.default for p in kernel.params}
        return -float(params["BN"] * params["BK"])

    mutation, repaired, steps = OfflineAgent().repair(_ctx(larger_tiles_first), held, checked, set())
    assert repaired.ok and repaired.kernel is not None
    # a consumer fewer, the rest re-split: the tile the move chose kept (one step would have halved it)
    assert _tile_and_split(repaired.kernel) == (128, 64, 3, 24, 160) and steps == 2
    assert mutation.description.endswith("repair CONSUMERS 4->3; repair registers re-split (E0307) "
                                         "(the fastest-priced of 3 legal repairs)")


def test_without_the_model_a_repair_is_one_of_the_legal_ways_and_a_seen_one_is_not_proposed() -> None:
    held, checked = _held_refused()
    ends: dict[tuple[int, ...], str] = {}
    for seed in range(8):
        ctx = _ctx(None)
        ctx.rng.seed(seed)
        _, repaired, _ = OfflineAgent().repair(ctx, held, checked, set())
        assert repaired.ok and repaired.kernel is not None
        ends[_tile_and_split(repaired.kernel)] = repaired.text
    assert set(ends) == {(64, 64, 4, 24, 112), (128, 32, 4, 24, 112), (128, 64, 3, 24, 160)}
    # where the run has seen two of the ways' ends, the third is the repair, whatever the draw
    unseen = (128, 64, 3, 24, 160)
    seen = {ir_hash(text) for key, text in ends.items() if key != unseen}
    for seed in range(4):
        ctx = _ctx(None)
        ctx.rng.seed(seed)
        _, repaired, _ = OfflineAgent().repair(ctx, held, checked, seen)
        assert repaired.kernel is not None and _tile_and_split(repaired.kernel) == unseen
