"""defer_merge: Before/Expected in CAKE's own syntax (the checker's ping-pong fixture), and the kernels it leaves
alone. The CUDA backend's code for it: tests/lowering/cuda/test_cuda_defer.py."""

from __future__ import annotations

from cake.ir.check import check
from cake.ir.checks.fixtures import PINGPONG, PLAIN
from cake.ir.parser import parse
from cake.ir.transforms.defer_merge import defer_merge

from cake.diagnostics import Severity

DEFERRED = PINGPONG.replace("pingpong consumer around mma\n", "pingpong consumer around mma\ndefer consumer best, besti\n")


def test_the_running_argmin_of_the_consumers_is_merged_after_their_loop() -> None:
    out = defer_merge(parse(PINGPONG))
    assert out == parse(DEFERRED)
    assert [d for d in check(out) if d.severity is Severity.ERROR] == []


def test_a_running_minimum_without_its_position_is_deferred_alone() -> None:
    text = PLAIN.replace("    besti = where(m < best, i, besti)\n", "")
    out = defer_merge(parse(text))
    assert out == parse(text + "defer main best\n")
    only_value = PLAIN.replace("    besti = where(m < best, i, besti)\n", "    besti = i\n")
    assert defer_merge(parse(only_value)) == parse(only_value + "defer main best\n")  # `i` stays the loop's own


def test_a_deferred_or_reductionless_kernel_is_left_alone() -> None:
    assert defer_merge(parse(DEFERRED)) is None
    no_running = PINGPONG.replace("    best = minimum(m, best)\n", "    best = m\n")
    assert defer_merge(parse(no_running)) is None
