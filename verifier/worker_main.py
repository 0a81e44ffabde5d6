"""The worker process: loads one kernel, then runs one gate (or one replay) per request.

Started by `cake.verifier.worker` as `python -m cake.verifier.worker_main` in its own session, with
`TRITON_INTERPRET=1` already in the environment when the device is the CPU (Triton reads it at import,
so it cannot be set from here). The worker catches nothing from the kernel or the gates: a crash ends
the process, and the parent records RUNTIME_ERROR with the tail of this process's stderr. That keeps
"the kernel crashed" from ever turning into a quiet score.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from cake.verifier.worker_protocol import KernelRef, MessageType, RefKind, ReplayOutcome, decode, encode

from cake.diagnostics import DiagnosticError
from cake.process_groups import exit_with_parent

if TYPE_CHECKING:
    from cake.verifier.results import GateResult


def _claim_protocol_channel() -> BinaryIO:
    """Keep the real stdout for the protocol and send fd 1 (Python and C prints alike) to stderr."""
    channel = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return channel


def load_kernel(ref: KernelRef) -> Callable[..., Any] | str:
    """The kernel callable, or a one-line reason it cannot be named. Exceptions raised by the
    kernel's own module code propagate (the parent reports them as a load failure)."""
    if ref.kind is RefKind.FILE:
        path = Path(ref.target)
        # A unique module name, so that two kernels called `kernel.py` never share a module, and the
        # module is registered so Triton's @jit (which reads source through `inspect`) can find it.
        module_name = f"cake_kernel_{ref.source_hash()[:16]}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            return f"cannot import {path}"
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        sys.path.insert(0, str(path.parent))  # so a kernel can import its sibling helpers
        spec.loader.exec_module(module)
        kernel = getattr(module, ref.name, None)
        if kernel is None:
            return f"{path.name} has no attribute {ref.name!r}"
    else:
        try:
            module = importlib.import_module(ref.target)
        except ImportError as error:
            return f"loader module {ref.target!r} is not importable: {error}"
        loader = getattr(module, ref.name, None)
        if loader is None:
            return f"loader module {ref.target!r} has no function {ref.name!r}"
        try:
            kernel = loader(ref.argument, **dict(ref.options))
        except DiagnosticError as error:  # a schedule its loader refused: the located diagnostics, not a traceback
            return f"the schedule was refused:{error}"
    if not callable(kernel):
        return f"{ref.describe()} is not callable"
    return kernel


def main(argv: list[str] | None = None) -> None:
    """`python -m cake.verifier.worker_main [--parent PID]`: serve requests on stdin until end of input. With
    `--parent` (what `Worker` passes), the worker's group also ends once that process is gone, even inside a request:
    a hung gate whose bench or evaluator was killed does not keep the GPU."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--parent"] and len(args) == 2 and args[1].isdigit():
        exit_with_parent(int(args[1]))
    elif args:
        raise SystemExit(f"usage: python -m cake.verifier.worker_main [--parent PID], not {' '.join(args)}")
    channel = _claim_protocol_channel()
    # Imported after the channel is claimed so that import-time prints cannot reach the protocol.

    kernel: Callable[..., Any] | None = None
    interpreter = False
    for line in sys.stdin.buffer:
        kind, payload = decode(line)
        if kind is MessageType.LOAD:
            loaded = load_kernel(KernelRef.from_json(payload["kernel"]))
            if isinstance(loaded, str):
                channel.write(encode(MessageType.LOAD_ERROR, message=loaded))
                return
            kernel = loaded
            # Only a kernel that brought Triton in runs under the interpreter (torch never imports it);
            # the gates skip bf16 for such kernels on the CPU, where the interpreter's bf16 is garbage.
            interpreter = os.environ.get("TRITON_INTERPRET") == "1" and "triton" in sys.modules
            channel.write(encode(MessageType.LOADED))
        elif kind is MessageType.GATE:
            assert kernel is not None, "protocol: GATE before LOAD"
            result = _run_gate(kernel, payload, interpreter)
            channel.write(encode(MessageType.GATE_RESULT, result=result.to_json()))
        elif kind is MessageType.REPLAY:
            assert kernel is not None, "protocol: REPLAY before LOAD"
            channel.write(encode(MessageType.REPLAY_RESULT, outcome=_replay(kernel, payload, interpreter).to_json()))
        elif kind is MessageType.STANDARD:
            assert kernel is not None, "protocol: STANDARD before LOAD"
            passed, reason = _run_standard(kernel, payload)
            channel.write(encode(MessageType.STANDARD_RESULT, passed=passed, reason=reason))
        else:
            raise ValueError(f"protocol: unexpected message {kind.value!r} sent to a worker")


def _run_gate(kernel: Callable[..., Any], payload: dict[str, Any], interpreter: bool) -> GateResult:
    from cake.verifier.battery import run_gate
    from cake.verifier.registry import get_contract
    from cake.verifier.worker_protocol import resource_report_from_json

    return run_gate(
        payload["gate_id"],
        get_contract(payload["op"]),
        kernel,
        device=payload["device"],
        dtypes=tuple(payload["dtypes"]),
        seed=payload["seed"],
        interpreter=interpreter,
        resource_report=resource_report_from_json(payload.get("resource_report")),
    )


def _replay(kernel: Callable[..., Any], payload: dict[str, Any], interpreter: bool) -> ReplayOutcome:
    from cake.verifier.replay import replay

    result = replay(payload["token"], kernel, payload["device"], interpreter=interpreter)
    return ReplayOutcome(result.token, result.case.describe(), result.inputs_hash, result.status, result.reason,
                         result.evidence)


def _run_standard(kernel: Callable[..., Any], payload: dict[str, Any]) -> tuple[bool, str]:
    from cake.verifier.registry import get_contract
    from cake.verifier.standard import standard_check

    result = standard_check(get_contract(payload["op"]), kernel, device=payload["device"], seed=payload["seed"])
    return bool(result.passed), str(result.detail)


if __name__ == "__main__":
    main()
