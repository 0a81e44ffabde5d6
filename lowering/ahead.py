"""Compiling ahead: build every specialization a run of calls will need before the calls run.

A backend that specializes per call (the CUDA backend: dtype variables and `static` dims are compile-time
constants, one nvcc run each) compiles lazily at a call's first use, in the middle of whatever makes the call
(a gate, a timing loop). `LoadedKernel.compile_ahead(calls)` builds the same specializations beforehand, on the
CPU, several at once, into the same disk cache the calls then read: a call's result never depends on whether
its specialization was compiled ahead (the cache is keyed by the generated source, the target, the flags and
the compiler's version). A specialization that fails to build is reported here and fails again, located, at
its call.

Calls are given as tensors on torch's `meta` device: only shapes and dtypes decide a specialization.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


class AheadStatus(enum.Enum):
    BUILT = "built"  # compiled now
    CACHED = "cached"  # already in the disk cache
    REFUSED = "refused"  # the kernel declines these inputs (ShapeNotSupported): its call is a refused case
    FAILED = "failed"  # lowering or the compiler failed: the call will fail the same way


@dataclass(frozen=True, slots=True)
class AheadEntry:
    specialization: str  # e.g. "T=bf16 D=128 sm_90a"
    status: AheadStatus
    seconds: float
    detail: str = ""  # why it was refused or failed (first line)

    def to_json(self) -> dict[str, object]:
        return {"specialization": self.specialization, "status": self.status.value, "seconds": self.seconds,
                "detail": self.detail}

    @staticmethod
    def from_json(data: dict[str, object]) -> AheadEntry:
        return AheadEntry(str(data["specialization"]), AheadStatus(data["status"]), float(data["seconds"]),  # type: ignore[arg-type]
                          str(data.get("detail", "")))


@dataclass(frozen=True, slots=True)
class AheadReport:
    """What compiling ahead did: one entry per distinct specialization of the calls, in first-call order.
    `unsupported` says why nothing was compiled (a backend that compiles nothing per call)."""

    entries: tuple[AheadEntry, ...] = ()
    unsupported: str | None = None

    def count(self, status: AheadStatus) -> int:
        return sum(e.status is status for e in self.entries)

    def summary(self) -> str:
        if self.unsupported is not None:
            return f"nothing compiled ahead: {self.unsupported}"
        counts = ", ".join(f"{self.count(s)} {s.value}" for s in AheadStatus if self.count(s))
        return f"{len(self.entries)} specializations ({counts or 'none'})"

    def to_json(self) -> dict[str, object]:
        return {"entries": [e.to_json() for e in self.entries], "unsupported": self.unsupported}

    @staticmethod
    def from_json(data: dict[str, object]) -> AheadReport:
        entries = data.get("entries") or []
        assert isinstance(entries, list)
        unsupported = data.get("unsupported")
        return AheadReport(tuple(AheadEntry.from_json(e) for e in entries),
                           None if unsupported is None else str(unsupported))


@runtime_checkable
class CompilesAhead(Protocol):
    """A backend callable that specializes per call and can build those specializations beforehand."""

    def compile_ahead(self, calls: Sequence[tuple[Any, ...]], capability: tuple[int, int], jobs: int) -> AheadReport:
        ...
