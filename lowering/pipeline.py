"""The lowering pipeline: a straight, named list of passes that reads top to bottom.

A pass is `Kernel -> Kernel` (it may also refuse by raising `DiagnosticError`); a backend's pipeline ends
with its emitter, which turns the last kernel into source. `--dump-after PASS` prints the kernel (through
the IR printer) after the named pass, or the generated source after `emit`.

A pass (or emitter) that crashes is a bug in CAKE: `guarded` turns the crash into `cake.errors.InternalError`
naming the pass and carrying the kernel it was given, never into a diagnostic about the schedule.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from cake.ir.nodes import DType, Kernel

from cake.errors import InternalError

EMIT = "emit"  # the name `--dump-after` uses for a backend's final emit step
# What a pass or generator bug raises on an unusual-but-valid kernel; a refusal is a DiagnosticError instead.
PASS_BUGS = (ArithmeticError, AssertionError, AttributeError, LookupError, RecursionError, TypeError, ValueError)


@dataclass(frozen=True, slots=True)
class LowerContext:
    """What every pass may read besides the kernel: the backend, the target, the param assignment, the
    user's file name (for diagnostics), and — when a backend specializes for one call — the call's sizes of
    `static` dims and its dtype-variable bindings (empty when lowering ahead of any call)."""

    backend: str
    arch: str
    params: Mapping[str, int] = field(default_factory=dict)
    filename: str = "<input>"
    dims: Mapping[str, int] = field(default_factory=dict)
    dtypes: Mapping[str, DType] = field(default_factory=dict)


PassFn = Callable[[Kernel, LowerContext], Kernel]
DumpHook = Callable[[str, Kernel], None]


@dataclass(frozen=True, slots=True)
class Pass:
    name: str
    run: PassFn
    summary: str  # one line for `cake lower --list-passes`


class UnknownPassError(ValueError):
    pass


def pass_names(passes: Sequence[Pass]) -> tuple[str, ...]:
    return tuple(p.name for p in passes) + (EMIT,)


def run_passes(kernel: Kernel, passes: Sequence[Pass], ctx: LowerContext, *,
               dump_after: str | None = None, dump: DumpHook | None = None) -> Kernel:
    """Run `passes` in order; after the pass named `dump_after`, hand the kernel to `dump`."""
    if dump_after is not None and dump_after not in pass_names(passes):
        raise UnknownPassError(f"unknown pass `{dump_after}`; passes: {', '.join(pass_names(passes))}")
    for step in passes:
        with guarded(f"pass {step.name}", kernel):
            kernel = step.run(kernel, ctx)
        if dump is not None and step.name == dump_after:
            dump(step.name, kernel)
    return kernel


@contextmanager
def guarded(stage: str, kernel: Kernel) -> Iterator[None]:
    """Run the body; a crash in it (one of PASS_BUGS) becomes an InternalError naming `stage`."""
    from cake.ir.printer import print_kernel

    try:
        yield
    except InternalError as error:  # raised deeper (a check, a generator): add the kernel it failed on
        if error.schedule is None:
            error.schedule = print_kernel(kernel)
        raise
    except PASS_BUGS as error:
        raise InternalError(stage, error, print_kernel(kernel)) from error
