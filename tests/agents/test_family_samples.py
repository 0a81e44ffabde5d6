"""A family operator (a structural move that redraws every param it brings) is drawn FAMILY_SAMPLES times and the
child the cost model prices fastest is proposed: session 28's H200 seeds each timed one draw of `warp_specialize`,
a poor one, and never left its neighbourhood."""

from __future__ import annotations

import random

from cake.agents.base import TurnContext
from cake.agents.offline import FAMILY_OPERATORS, FAMILY_SAMPLES, OfflineAgent, OfflineSettings
from cake.agents.specialize import SPECIALIZING
from cake.agents.validation import make_validator
from cake.ir import nodes as n
from cake.ir.printer import print_kernel
from conftest import seed_parent

ARCH, BACKEND = "sm_90a", "cuda"
VALIDATE = make_validator(ARCH, BACKEND)


def _consumers_times_producer_regs(kernel: n.Kernel) -> float:
    """A stand-in price that orders draws by their params (fewer consumers, then fewer producer registers)."""
    params = {p.name: p.default for p in kernel.params}
    return float(params.get("CONSUMERS", 0) * 1000 + params.get("PRODUCER_REGS", 0))


def _ctx(predict: object) -> TurnContext:
    return TurnContext(turn=1, op="kmeans_assign", arch=ARCH, n=4, parents=(seed_parent(),), failures=(),
                       seen_hashes=frozenset(), rng=random.Random(0), validate=VALIDATE, backend=BACKEND,
                       predict=predict)  # type: ignore[arg-type]


def test_the_proposed_draw_is_the_fastest_priced_legal_one_of_the_samples() -> None:
    seed = seed_parent().kernel
    for rng_seed in range(3):
        chosen = OfflineAgent().apply("warp_specialize", seed, _ctx(_consumers_times_producer_regs),
                                       random.Random(rng_seed))
        replay = random.Random(rng_seed)  # the same draws, in order: checking and pricing take nothing from the rng
        draws = [SPECIALIZING["warp_specialize"](seed, replay) for _ in range(FAMILY_SAMPLES)]
        legal = []
        for draw in draws:
            assert draw is not None
            checked = VALIDATE(print_kernel(draw.kernel))
            if checked.ok and checked.kernel is not None:
                legal.append((_consumers_times_producer_regs(checked.kernel), len(legal), draw))
        assert chosen is not None and legal
        assert chosen.kernel == min(legal)[2].kernel
        assert f"the fastest-priced of {len(legal)} legal draws of {FAMILY_SAMPLES}" in chosen.description


def test_one_draw_without_the_model_or_with_one_sample_and_for_other_operators() -> None:
    seed = seed_parent().kernel

    def single(ctx: TurnContext, settings: OfflineSettings, name: str = "warp_specialize") -> str:
        child = OfflineAgent(settings).apply(name, seed, ctx, random.Random(5))
        assert child is not None
        return print_kernel(child.kernel)

    one_draw = SPECIALIZING["warp_specialize"](seed, random.Random(5))
    assert one_draw is not None
    assert single(_ctx(None), OfflineSettings()) == print_kernel(one_draw.kernel)
    assert single(_ctx(_consumers_times_producer_regs), OfflineSettings(family_samples=1)) == \
        print_kernel(one_draw.kernel)
    precompute = SPECIALIZING["precompute"](seed, random.Random(5))  # not a family: it introduces no params
    assert "precompute" not in FAMILY_OPERATORS and precompute is not None
    assert single(_ctx(_consumers_times_producer_regs), OfflineSettings(), "precompute") == \
        print_kernel(precompute.kernel)


def test_a_move_whose_pass_does_not_apply_is_none_after_one_try() -> None:
    specialized = SPECIALIZING["warp_specialize"](seed_parent().kernel, random.Random(0))
    assert specialized is not None
    calls = []

    def counting(kernel: n.Kernel) -> float:
        calls.append(kernel)
        return 1.0

    assert OfflineAgent().apply("warp_specialize", specialized.kernel, _ctx(counting), random.Random(0)) is None
    assert not calls
