"""Exceptions shared by the lowering, the checker and the verifier (a foundation module: it imports nothing
of CAKE).

`ShapeNotSupported` is how a kernel says "I cannot run this shape" — the way cuBLAS returns
NOT_SUPPORTED or flash-kmeans switches algorithms. The verifier records such a case as refused: it is
neither run nor judged, it is listed in the verdict, and a kernel that refuses every case is never a pass.

`InternalError` is a bug in CAKE itself (a check, a pass, a generator crashed): it is reported as such, with
how to report it, and never turned into a diagnostic, a rejection or a low score.
"""

from __future__ import annotations


class ShapeNotSupported(Exception):
    """The kernel cannot run at these input shapes; `reason` says which shape and which limit.

    Raise it BEFORE any work (no output written, no input touched), and only for shapes the kernel cannot
    run — a resource limit, a tile that does not fit on chip, a dim outside the kernel's domain. Never raise
    it for numerical trouble (NaN, overflow, bad values): that is the verifier's to judge, and a refusal that
    depends on values rather than shapes hides a bug.
    """

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


# Every internal error's text starts with this, so a boundary that only sees text (a verifier worker's answer,
# a stored evaluation) can still tell a CAKE bug from a refusal.
INTERNAL_ERROR_MARKER = "internal error in CAKE"
INTERNAL_EXIT_CODE = 3  # what every `cake` subcommand exits with on an InternalError
REPORT_HOW = ("this is a bug in CAKE, not in the schedule: please report it (an issue on CAKE's repository) with "
              "the schedule text and this message")


class InternalError(Exception):
    """A checker, pass or generator bug: never a diagnostic about the schedule, never a rejection.

    `stage` names what failed (`check E0402 (mbarrier arrival count mismatch)`, `pass bind_params`, `CUDA
    generator`); `schedule` is the IR text it was given (printed canonically) so the report reproduces it.
    The CLI prints `report()` and exits with `INTERNAL` (3); the evolve loop records the candidate as
    `error: internal`.
    """

    def __init__(self, stage: str, cause: BaseException | str, schedule: str | None = None):
        self.stage = stage
        self.cause = cause if isinstance(cause, str) else f"{type(cause).__name__}: {cause}"
        self.schedule = schedule
        super().__init__(f"{INTERNAL_ERROR_MARKER} ({stage}): {self.cause}")

    def report(self) -> str:
        lines = [f"{self} — {REPORT_HOW}."]
        if self.schedule is not None:
            lines += ["", f"schedule given to {self.stage}:", self.schedule.rstrip()]
        return "\n".join(lines)


def is_internal(message: str) -> bool:
    """Whether an error's text (e.g. relayed from a verifier worker) is a CAKE internal error."""
    return INTERNAL_ERROR_MARKER in message
