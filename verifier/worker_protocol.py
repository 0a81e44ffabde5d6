"""What the verifier parent and its worker subprocess say to each other, and how a kernel is named.

The wire format is one JSON object per line. The worker writes its answers on a private copy of its
original stdout; everything the kernel prints lands on stderr, so a chatty kernel cannot corrupt the
protocol.

A kernel is named by a `KernelRef`, never by a Python object: the worker must be able to load it
again after a restart, and the verifier imports nothing of `cake.ir`, `cake.lowering` or
`cake.agents` — a loader reference names such a module by string, and only the worker imports it.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cake.verifier.gates.base import ResourceReport
    from cake.verifier.results import Evidence, GateStatus


class RefKind(enum.Enum):
    FILE = "file"  # `path/to/kernel.py:func`
    LOADER = "loader"  # `package.module:function` called with one argument (e.g. a `.cake` path)


class KernelRefError(ValueError):
    """A kernel reference that cannot name anything (bad syntax, missing file)."""


@dataclass(frozen=True, slots=True)
class KernelRef:
    """Names a kernel callable so that a fresh process can load it.

    FILE: `target` is an absolute path to a `.py` file and `name` the callable in it.
    LOADER: `target` is an importable module, `name` a function in it, called as
    `function(argument, **options)`; it returns the kernel callable. `options` carry everything else that
    decides the kernel (a schedule's backend, arch and params), so the reference alone names the kernel:
    no environment variable has to travel with it, and the verdict cache keys on them.
    """

    kind: RefKind
    target: str
    name: str
    argument: str | None = None
    options: tuple[tuple[str, str], ...] = ()

    @staticmethod
    def parse(text: str) -> KernelRef:
        """Parse `PATH.py:FUNC`; the path is resolved against the current directory."""
        path, sep, func = text.rpartition(":")
        if not sep or not path or not func:
            raise KernelRefError(f"kernel reference {text!r} is not of the form PATH.py:FUNC")
        if not path.endswith(".py"):
            raise KernelRefError(f"kernel reference {text!r}: {path!r} is not a .py file")
        if not func.isidentifier():
            raise KernelRefError(f"kernel reference {text!r}: {func!r} is not a Python identifier")
        resolved = Path(path).expanduser().resolve()
        if not resolved.is_file():
            raise KernelRefError(f"kernel file {path!r} does not exist")
        return KernelRef(RefKind.FILE, str(resolved), func)

    @staticmethod
    def loader(loader: str, argument: str, options: Mapping[str, str] | None = None) -> KernelRef:
        """`loader` is `module:function`; a path-like argument is resolved to an absolute path; `options`
        are keyword arguments of the loader (strings, sorted by name)."""
        module, sep, func = loader.rpartition(":")
        if not sep or not module or not func.isidentifier():
            raise KernelRefError(f"loader {loader!r} is not of the form package.module:function")
        bad = [k for k in (options or {}) if not k.isidentifier()]
        if bad:
            raise KernelRefError(f"loader options {bad} are not Python identifiers")
        arg_path = Path(argument).expanduser()
        resolved = str(arg_path.resolve()) if arg_path.exists() else argument
        return KernelRef(RefKind.LOADER, module, func, resolved, tuple(sorted((options or {}).items())))

    def describe(self) -> str:
        if self.kind is RefKind.FILE:
            return f"{self.target}:{self.name}"
        extra = "".join(f", {k}={v!r}" for k, v in self.options)
        return f"{self.target}:{self.name}({self.argument!r}{extra})"

    def source_hash(self) -> str:
        """Hash of what determines the kernel's behaviour, for the verdict cache.

        FILE: the file's bytes. LOADER: the loader's name plus the argument file's bytes when the
        argument is a file (the loader's own code is versioned with CAKE, not with the kernel).
        Files a kernel imports besides its own are not hashed: a cache hit assumes they are fixed.
        """
        digest = hashlib.sha256()
        digest.update(f"{self.kind.value}\0{self.target}\0{self.name}\0".encode())
        for key, value in self.options:  # absent options add nothing: older cache keys stay valid
            digest.update(f"{key}={value}\0".encode())
        if self.kind is RefKind.FILE:
            digest.update(Path(self.target).read_bytes())
        elif self.argument is not None:
            arg_path = Path(self.argument)
            digest.update(arg_path.read_bytes() if arg_path.is_file() else self.argument.encode())
        return digest.hexdigest()

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "target": self.target, "name": self.name, "argument": self.argument,
                "options": dict(self.options)}

    @staticmethod
    def from_json(data: dict[str, Any]) -> KernelRef:
        options = tuple(sorted((str(k), str(v)) for k, v in dict(data.get("options") or {}).items()))
        return KernelRef(RefKind(data["kind"]), data["target"], data["name"], data.get("argument"), options)


class MessageType(enum.Enum):
    # parent -> worker
    LOAD = "load"
    GATE = "gate"
    REPLAY = "replay"
    STANDARD = "standard"  # the KernelBench-style check, for `cake audit`
    # worker -> parent
    LOADED = "loaded"
    LOAD_ERROR = "load_error"
    GATE_RESULT = "gate_result"
    REPLAY_RESULT = "replay_result"
    STANDARD_RESULT = "standard_result"


def encode(kind: MessageType, **payload: Any) -> bytes:
    return (json.dumps({"type": kind.value, **payload}, allow_nan=True) + "\n").encode()


def decode(line: bytes) -> tuple[MessageType, dict[str, Any]]:
    data = json.loads(line)
    return MessageType(data.pop("type")), data


# Values that cross the pipe besides GateResult (which has its own to_json/from_json). The resource
# report and the replay outcome are the library's types; these functions are the only place the
# worker depends on their layout.

def resource_report_to_json(report: ResourceReport | None) -> dict[str, Any] | None:
    return None if report is None else dataclasses.asdict(report)


def resource_report_from_json(data: dict[str, Any] | None) -> ResourceReport | None:
    if data is None:
        return None
    from cake.verifier.gates.base import ResourceReport

    return ResourceReport.from_mapping(data)


@dataclasses.dataclass(frozen=True, slots=True)
class ReplayOutcome:
    """What a replay in the worker reports: the library's ReplayResult without its Case object."""

    token: str
    case: str  # the case's one-line description
    inputs_hash: str
    status: GateStatus
    reason: str
    evidence: Evidence | None

    def to_json(self) -> dict[str, Any]:
        return {"token": self.token, "case": self.case, "inputs_hash": self.inputs_hash, "status": self.status.value,
                "reason": self.reason, "evidence": self.evidence.to_json() if self.evidence else None}

    @staticmethod
    def from_json(data: dict[str, Any]) -> ReplayOutcome:
        from cake.verifier.results import Evidence, GateStatus

        evidence = data.get("evidence")
        return ReplayOutcome(data["token"], data["case"], data["inputs_hash"], GateStatus(data["status"]),
                             data["reason"], Evidence.from_json(evidence) if evidence else None)
