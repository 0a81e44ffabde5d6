"""A `cake.verifier.timing.Clock` for CPU tests: every recorded event is one millisecond after the previous one,
so each timed call measures exactly 1 ms and a run's samples are known in advance. The benchmark tests run in
subprocesses (TRITON_INTERPRET must be set before Triton is imported); they import it from this folder."""

from __future__ import annotations

import os


class Tick:
    now = 0.0

    def record(self) -> float:
        self.now += 1.0
        return self.now

    def elapsed_ms(self, a: float, b: float) -> float:
        return b - a

    def wait(self, mark: object) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def flush_l2(self) -> None:
        pass

    def wall_s(self) -> float:
        return 0.0


def with_here(*paths: str | None) -> str:
    """A PYTHONPATH with this folder first (so a subprocess script can `from scripted_clock import Tick`), then
    `paths` (None and empty ones skipped)."""
    from pathlib import Path

    return os.pathsep.join([str(Path(__file__).resolve().parent), *(p for p in paths if p)])
