"""What a backend hands to the runtime: generated source plus everything needed to load and explain it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from cake.diagnostics import Span


@dataclass(frozen=True, slots=True)
class LaunchInfo:
    """One device function of a lowered kernel (one IR launch)."""

    name: str  # the IR launch name (`main` for a single-launch schedule)
    function: str  # the device function's name in the source
    num_warps: int
    persistent: bool
    max_registers: int | None = None  # a role's register budget, passed to the compiler when set
    num_stages: int | None = None  # software-pipelining depth passed at launch (None: the compiler's default)


@dataclass(frozen=True, slots=True)
class ResourceUsage:
    """What the compiler reports for one compiled device function."""

    launch: str
    registers_per_thread: int | None = None
    spill_bytes: int | None = None
    smem_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class SourceMap:
    """Which schedule span produced each generated line: `lines[i]` is (1-based generated line, span)."""

    lines: tuple[tuple[int, Span], ...] = ()

    def span_at(self, line: int) -> Span | None:
        """The span of the nearest tagged line at or above `line`."""
        best: Span | None = None
        for generated, span in self.lines:
            if generated > line:
                break
            best = span
        return best


@dataclass(frozen=True, slots=True)
class EmitResult:
    """A backend emitter's output, before the runtime stamps it with a cache key."""

    source: str
    entry: str  # the host function with the op's signature
    launches: tuple[LaunchInfo, ...]
    source_map: SourceMap = SourceMap()
    artifacts: tuple[tuple[str, str], ...] = ()  # further files (name, text) a backend needs beside `source`


@dataclass(frozen=True, slots=True)
class LoweredKernel:
    """A schedule lowered for one backend, target and param assignment.

    `source` is complete and readable (`cake lower` prints it). `key` names it in the compile cache: a hash
    of the specialized kernel's IR, the arch, the backend, its codegen version and the toolchain versions.
    """

    schedule: str
    op: str
    backend: str
    arch: str
    params: tuple[tuple[str, int], ...]
    source: str
    entry: str
    launches: tuple[LaunchInfo, ...]
    ir_hash: str
    key: str
    toolchain: tuple[tuple[str, str], ...]
    filename: str = "<input>"  # the schedule's file, for diagnostics
    schedule_text: str | None = None  # the schedule's text, for rendering diagnostics with a caret
    source_map: SourceMap = SourceMap()
    artifacts: tuple[tuple[str, str], ...] = ()
    metadata: Mapping[str, str] = field(default_factory=dict)

    @property
    def param_dict(self) -> dict[str, int]:
        return dict(self.params)
