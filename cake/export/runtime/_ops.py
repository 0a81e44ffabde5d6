"""The ops of an exported package: validation, the shape-bucketed dispatcher, the reference fallback and the
torch.library registration.

Part of an exported package (copied verbatim by `cake export`): standard library, torch and triton only.

Every op `OP` of the package is registered as `torch.ops.<namespace>.OP` (plus `OP_reference`, the
fp64 reference as an opaque op, and `OP_out`, the out-variant: results into the caller's tensors, scratch in the
caller's workspace; `_out`). A call is validated (tensor count, device, rank, dtype, agreeing dims:
a clear `TypeError`/`ValueError` otherwise), then routed once per call signature (shapes, strides, dtype,
device): inside the declared shape domain, to the first variant of the nearest bucket that runs it;
outside, or when no variant runs it, to the reference — counted (`fallback_counts()`), with one warning
per (op, reason). CPU tensors take the reference (the CPU implementation) unless `CAKE_EXPORT_INTERPRET=1` (with `TRITON_INTERPRET=1`),
where Triton variants run under the interpreter and are routed like GPU calls.
"""

from __future__ import annotations

import collections
import importlib.util
import inspect
import json
import math
import os
import sys
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from . import _integrity, _kernels, _launcher, _out

FORMAT = 1
FLOAT_NAMES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
INT_DTYPES = {"int32": torch.int32, "int64": torch.int64}


class OutOfDomainWarning(UserWarning):
    """A call fell back to the reference implementation (slow; shown once per op and reason)."""


def signature(inputs: Sequence[torch.Tensor]) -> tuple[Any, ...]:
    """What a call's route depends on: each input's device, dtype, shape and strides (unrolled for the common
    arities: this runs on every call). Every device is in it: a cached route never takes an input from another
    device than the call it was validated for."""
    if len(inputs) == 2:
        a, b = inputs
        return a.device, a.dtype, a.shape, a.stride(), b.device, b.dtype, b.shape, b.stride()
    if len(inputs) == 3:
        a, b, c = inputs
        return (a.device, a.dtype, a.shape, a.stride(), b.device, b.dtype, b.shape, b.stride(), c.device, c.dtype,
                c.shape, c.stride())
    return tuple((t.device, t.dtype, t.shape, t.stride()) for t in inputs)


class Fallback:
    """A call signature no variant runs: the reference op, counted."""

    def __init__(self, op: ExportedOp, reason: str):
        self.op, self.reason = op, reason

    def __call__(self, *inputs: torch.Tensor) -> Any:
        self.op.count_fallback(self.reason)
        return self.op.reference_op(*inputs)


class ExportedOp:
    def __init__(self, namespace: str, name: str, meta: Mapping[str, Any],
                 variants: Mapping[str, Any], reference: Callable[..., tuple[torch.Tensor, ...]]):
        self.namespace, self.name, self.meta = namespace, name, meta
        self.inputs: list[dict[str, Any]] = list(meta["inputs"])
        self.outputs: list[dict[str, Any]] = list(meta["outputs"])
        self.float_dtypes = tuple(getattr(torch, n) for n in meta["float_dtypes"])
        self.domain = {d: (int(lo), int(hi)) for d, (lo, hi) in meta["domain"].items()}
        self.buckets = [(b["name"], {d: math.log2(max(1, v)) for d, v in b["center"].items()},
                         [variants[v] for v in b["variants"]]) for b in meta["buckets"]]
        self.reference = reference
        self.routes: dict[tuple[Any, ...], Callable[..., Any]] = {}
        self.launcher: Any = None  # the C++ launcher's ops, when it runs this op's CUDA calls
        self.table = -1  # this op's plan table in the launcher
        self.autograd_bypassed = False  # the launcher also runs at AutogradCUDA (`_launcher.cpp: bypass_autograd`)
        self.offered: set[tuple[Any, ...]] = set()  # signatures whose plan went (or cannot go) to the launcher
        self.expected: dict[tuple[Any, ...], list[tuple[tuple[int, ...], torch.dtype]]] = {}  # outputs per signature
        self.out_routes: dict[tuple[Any, ...], tuple[str, int, int]] = {}  # `out_route` per signature
        self.out_name = f"{name}_out"
        self.out_names = [o["name"] for o in self.outputs]
        self.input_names = [i["name"] for i in self.inputs]
        self.fallbacks: collections.Counter[str] = collections.Counter()
        self._warned: set[str] = set()
        self._lock = threading.Lock()

    # ---------------------------------------------------------------------------------- validation

    def bind(self, inputs: Sequence[Any]) -> tuple[dict[str, int], torch.dtype | None, torch.device]:
        """Dims, the float dtype and the device of a call; TypeError/ValueError naming the bad input."""
        names = ", ".join(i["name"] for i in self.inputs)
        if len(inputs) != len(self.inputs):
            raise TypeError(f"{self.name} takes {len(self.inputs)} tensors ({names}), got {len(inputs)}")
        dims: dict[str, int] = {}
        float_dtype: torch.dtype | None = None
        device: torch.device | None = None
        for spec, t in zip(self.inputs, inputs, strict=True):
            name = spec["name"]
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"{self.name}: `{name}` must be a torch.Tensor, got {type(t).__name__}")
            if device is None:
                device = t.device
            elif t.device != device:
                raise ValueError(f"{self.name}: `{name}` is on {t.device}, `{self.inputs[0]['name']}` on {device}")
            if t.dim() != len(spec["dims"]):
                raise ValueError(f"{self.name}: `{name}` must have {len(spec['dims'])} dims "
                                 f"[{', '.join(spec['dims'])}], got shape {tuple(t.shape)}")
            rule = spec["dtype"]
            if rule == "float":
                if t.dtype not in self.float_dtypes:
                    allowed = ", ".join(str(d).removeprefix("torch.") for d in self.float_dtypes)
                    raise TypeError(f"{self.name}: `{name}` is {t.dtype}; this op takes {allowed}")
                if float_dtype is None:
                    float_dtype = t.dtype
                elif t.dtype != float_dtype:
                    raise TypeError(f"{self.name}: `{name}` is {t.dtype}, the other inputs {float_dtype}")
            elif t.dtype != INT_DTYPES[rule]:
                raise TypeError(f"{self.name}: `{name}` must be {rule}, got {t.dtype}")
            for axis, dim in enumerate(spec["dims"]):
                size = t.shape[axis]
                if dims.setdefault(dim, size) != size:
                    raise ValueError(f"{self.name}: `{name}` dim {axis} ({dim}) is {size}, but {dim} = {dims[dim]} "
                                     "from an earlier input")
        assert device is not None
        return dims, float_dtype, device

    # ------------------------------------------------------------------------------------- routing

    def route(self, inputs: Sequence[torch.Tensor]) -> Callable[..., Any]:
        dims, float_dtype, device = self.bind(inputs)
        if device.type == "cpu" and not _kernels.interpreter_on():
            return self.reference_op  # the documented CPU implementation, not a fallback
        outside = [f"{d}={dims[d]} not in [{lo}, {hi}]" for d, (lo, hi) in self.domain.items()
                   if not lo <= dims[d] <= hi]
        if outside:
            return Fallback(self, "outside the shape domain: " + ", ".join(outside))
        ir_dtype = FLOAT_NAMES.get(float_dtype) if float_dtype is not None else None
        point = {d: math.log2(max(1, int(v))) for d, v in dims.items()}
        bucket, _, variants = min(self.buckets, key=lambda b: sum((point[d] - c) ** 2 for d, c in b[1].items()))
        why = []
        for variant in variants:
            refusal = variant.accepts(inputs, ir_dtype, device)
            if refusal is None:
                return variant.route(inputs, ir_dtype)  # type: ignore[no-any-return]
            why.append(refusal)
        return Fallback(self, f"no kernel of bucket {bucket} runs it: " + "; ".join(why))

    def __call__(self, *inputs: torch.Tensor) -> Any:
        for t in inputs:
            if type(t) is not torch.Tensor:  # fake/functional tensors while tracing, or not a tensor: no cache
                return self.route(inputs)(*inputs)
        key = signature(inputs)
        call = self.routes.get(key)
        if call is None:
            with self._lock:
                call = self.routes[key] = self.route(inputs)
        out = call(*inputs)
        if self.launcher is not None and key not in self.offered:
            self.offer(key, call, inputs)
        return out

    # --------------------------------------------------------------------------------- out-variant

    def cached_route(self, inputs: Sequence[torch.Tensor]) -> tuple[tuple[Any, ...] | None, Callable[..., Any]]:
        """(the signature, or None while tracing, and its route), as `__call__` finds them."""
        for t in inputs:
            if type(t) is not torch.Tensor:
                return None, self.route(inputs)
        key = signature(inputs)
        call = self.routes.get(key)
        if call is None:
            with self._lock:
                call = self.routes[key] = self.route(inputs)
        return key, call

    def output_specs(self, key: tuple[Any, ...] | None, inputs: Sequence[torch.Tensor]
                     ) -> list[tuple[tuple[int, ...], torch.dtype]]:
        """(shape, dtype) of each output for these inputs (cached per signature)."""
        specs = self.expected.get(key) if key is not None else None
        if specs is None:
            dims, _, _ = self.bind(inputs)
            specs = [(tuple(dims[d] for d in spec["dims"]), self.out_dtype(spec, inputs)) for spec in self.outputs]
            if key is not None:
                self.expected[key] = specs
        return specs

    def workspace_bytes(self, inputs: Sequence[torch.Tensor]) -> int:
        """The bytes of workspace `OP_out` needs for these inputs (0: none; pass workspace=None)."""
        key, call = self.cached_route(inputs)
        return self.out_route(key, call, inputs)[1]

    def out_route(self, key: tuple[Any, ...] | None, call: Callable[..., Any], inputs: Sequence[torch.Tensor]
                  ) -> tuple[str, int, int]:
        """How `OP_out` runs a route, the workspace bytes it takes and the alignment of the workspace's start it
        needs (cached per signature): `cuda`, a CUDA plan into the caller's outputs and workspace
        (`CudaCall.run_out`; 256 bytes, the launcher's layout rule); `triton`, the generated Triton launcher given
        them (`out=`, `workspace=`, sized by its `workspace_bytes`; 16 bytes, Triton's pointer alignment); `copy`,
        the reference computes and its results are copied in (no workspace)."""
        found = self.out_routes.get(key) if key is not None else None
        if found is None:
            triton = _kernels.triton_workspace(call)
            if isinstance(call, _kernels.CudaCall):
                found = ("cuda", call.workspace_bytes, _kernels.WORKSPACE_ALIGN_BYTES)
            elif triton is not None:
                sizer, align = triton
                found = ("triton", int(sizer(*inputs)), align)
            else:
                found = ("copy", 0, _kernels.WORKSPACE_ALIGN_BYTES)
            if key is not None:
                self.out_routes[key] = found
        return found

    def split_out_args(self, args: Sequence[Any]) -> tuple[list[Any], list[Any], Any]:
        n_out, n_in = len(self.outputs), len(self.inputs)
        if len(args) not in (n_out + n_in, n_out + n_in + 1):
            raise TypeError(f"{self.out_name} takes {n_out} outputs ({', '.join(self.out_names)}), {n_in} inputs "
                            f"({', '.join(self.input_names)}) and an optional workspace, got {len(args)} arguments")
        workspace = args[n_out + n_in] if len(args) > n_out + n_in else None
        return list(args[:n_out]), list(args[n_out:n_out + n_in]), workspace

    def call_out(self, *args: Any) -> None:
        """`OP_out(outs..., inputs..., workspace=None)`: the op's route with the caller's outputs and workspace.
        A CUDA call plan writes straight into them (nothing allocated where its inputs are contiguous and
        TMA-addressable), and so does a Triton kernel (its launcher's `out=` and `workspace=`); the reference
        computes the results and copies them in."""
        outs, inputs, workspace = self.split_out_args(args)
        key, call = self.cached_route(inputs)
        how, need, align = self.out_route(key, call, inputs)
        _out.check(self.name, self.out_name, outs, self.out_names, self.output_specs(key, inputs), inputs,
                   self.input_names, workspace, need, self.namespace, align)
        if how == "copy":
            results = call(*inputs)
            for out, result in zip(outs, results if isinstance(results, tuple) else (results,), strict=True):
                out.copy_(result)
        else:
            if key is not None:  # written through raw pointers: tell autograd the tensors change (as the C++ kernel)
                for out in outs:
                    torch.autograd.graph.increment_version(out)
            if how == "cuda":
                call.run_out(inputs, outs, workspace if need else None)  # type: ignore[attr-defined]
            else:
                call(*inputs, out=outs, workspace=workspace if need else None)
        if key is not None and self.launcher is not None and key not in self.offered:
            self.offer(key, call, inputs)

    def fake_out_impl(self, *args: Any) -> None:
        """Checks what tracing can check (dtypes, shapes, devices, contiguity); writes nothing."""
        outs, inputs, workspace = self.split_out_args(args)
        _out.check(self.name, self.out_name, outs, self.out_names, self.output_specs(None, inputs), inputs,
                   self.input_names, workspace, None, self.namespace)

    def cpu_out_impl(self, *args: Any) -> None:
        outs, inputs, workspace = self.split_out_args(args)
        if _kernels.interpreter_on():
            self.call_out(*args)
            return
        _out.check(self.name, self.out_name, outs, self.out_names, self.output_specs(None, inputs), inputs,
                   self.input_names, workspace, 0, self.namespace)
        results = self.reference_impl(*inputs)
        for out, result in zip(outs, results if isinstance(results, tuple) else (results,), strict=True):
            out.copy_(result)

    def out_signature(self) -> inspect.Signature:
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        params = [inspect.Parameter(o["name"], kind, annotation=torch.Tensor) for o in self.outputs]
        params += [inspect.Parameter(i["name"], kind, annotation=torch.Tensor) for i in self.inputs]
        params.append(inspect.Parameter(_out.WORKSPACE, kind, default=None, annotation=torch.Tensor | None))
        return inspect.Signature(params, return_annotation=None)

    def offer(self, key: tuple[Any, ...], call: Callable[..., Any], inputs: Sequence[torch.Tensor]) -> None:
        """Hand a signature's plan to the C++ launcher once it has run here (its plan is fixed by then); a
        signature only the Python path runs (a Triton variant, the reference, copied inputs) is offered once."""
        with self._lock:
            if key in self.offered:
                return
            self.offered.add(key)
        plan = call.plan_values() if isinstance(call, _kernels.CudaCall) else None
        if plan is not None:
            self.launcher.install(self.table, list(inputs), plan)

    def launcher_stats(self) -> dict[str, int]:
        """Calls the C++ launcher ran (`launched`), sent back to Python (`routed`), and its plans, then the same
        for the out-variant (`out_launched`, `out_routed`); {} without it."""
        if self.launcher is None:
            return {}
        launched, routed, plans, out_launched, out_routed = (int(v) for v in self.launcher.stats(self.table))
        return {"launched": launched, "routed": routed, "plans": plans, "out_launched": out_launched,
                "out_routed": out_routed}

    def launcher_workspace(self, inputs: Sequence[torch.Tensor]) -> dict[str, Any]:
        """The C++ launcher's workspace layout for `inputs`' signature (bytes, each scratch buffer's offset): the
        same as the Python plan's (`CudaCall.workspace_offsets`); {} without the launcher or a plan."""
        if self.launcher is None:
            return {}
        values = [int(v) for v in self.launcher.workspace(self.table, list(inputs))]
        return {"workspace_bytes": values[0], "scratch_offsets": values[1:]} if values else {}

    def launcher_layout(self, inputs: Sequence[torch.Tensor]) -> dict[str, Any]:
        """The C++ launcher's per-call memory for `inputs`' signature: the allocations a call makes, the shared
        block's bytes, whether the first output is that block's storage (its scratch tail rides along: see
        README, "C++ host path"), each scratch buffer's byte offset in it; {} without the launcher or a plan."""
        if self.launcher is None or not hasattr(self.launcher, "layout"):
            return {}
        values = [int(v) for v in self.launcher.layout(self.table, list(inputs))]
        if not values:
            return {}
        return {"allocations": values[0], "block_bytes": values[1], "first_output_holds_scratch": bool(values[2]),
                "scratch_offsets": values[3:]}

    def count_fallback(self, reason: str) -> None:
        with self._lock:
            self.fallbacks[reason] += 1
            first = reason not in self._warned
            self._warned.add(reason)
        if first:
            warnings.warn(f"{self.namespace}.{self.name}: falling back to the reference implementation ({reason}); "
                          f"counted in {self.namespace}.fallback_counts()", OutOfDomainWarning, stacklevel=3)

    # -------------------------------------------------------------------------- reference and fake

    def out_dtype(self, spec: Mapping[str, Any], inputs: Sequence[torch.Tensor]) -> torch.dtype:
        rule = str(spec["dtype"])
        if rule.startswith("same_as:"):
            source = rule.removeprefix("same_as:")
            return next(t.dtype for i, t in zip(self.inputs, inputs, strict=True) if i["name"] == source)
        return INT_DTYPES[rule]

    def reference_impl(self, *inputs: torch.Tensor) -> Any:
        """The fp64 reference the kernels were verified against, cast to the op's output dtypes."""
        self.bind(inputs)
        wide = [t.to(torch.float64) if t.is_floating_point() else t.to(torch.int64) for t in inputs]
        outs = [r.to(self.out_dtype(spec, inputs)) for r, spec in zip(self.reference(*wide), self.outputs, strict=True)]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def fake_impl(self, *inputs: torch.Tensor) -> Any:
        dims, _, device = self.bind(inputs)
        outs = [inputs[0].new_empty(tuple(dims[d] for d in spec["dims"]), dtype=self.out_dtype(spec, inputs))
                for spec in self.outputs]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def reference_op(self, *inputs: torch.Tensor) -> Any:
        return getattr(getattr(torch.ops, self.namespace), f"{self.name}_reference")(*inputs)

    def cpu_impl(self, *inputs: torch.Tensor) -> Any:
        return self(*inputs) if _kernels.interpreter_on() else self.reference_impl(*inputs)

    # -------------------------------------------------------------------------------- registration

    def integer_outputs(self) -> bool:
        """Whether every output has an integer (or bool) dtype: never differentiable, whatever the inputs."""
        return all(not str(spec["dtype"]).startswith("same_as:") for spec in self.outputs)

    def schema(self) -> str:
        args = ", ".join(f"Tensor {i['name']}" for i in self.inputs)
        outs = "Tensor" if len(self.outputs) == 1 else "(" + ", ".join("Tensor" for _ in self.outputs) + ")"
        return f"({args}) -> {outs}"

    def signature(self) -> inspect.Signature:
        params = [inspect.Parameter(i["name"], inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=torch.Tensor)
                  for i in self.inputs]
        ret: Any = torch.Tensor
        if len(self.outputs) > 1:
            ret = tuple.__class_getitem__(tuple(torch.Tensor for _ in self.outputs))
        return inspect.Signature(params, return_annotation=ret)

    def register(self, triton_only: bool, launcher: Any = None) -> None:
        qualified = f"{self.namespace}::{self.name}"
        torch.library.custom_op(f"{qualified}_reference", self.reference_impl, mutates_args=(),
                                schema=self.schema()).register_fake(self.fake_impl)
        out_schema = _out.schema(self.outputs, self.inputs)
        if triton_only:
            def body(*args: torch.Tensor, **kwargs: torch.Tensor) -> Any:
                inputs = [*args, *(kwargs[i["name"]] for i in self.inputs[len(args):])]
                if inputs[0].device.type == "cpu" and not _kernels.interpreter_on():
                    return self.reference_op(*inputs)  # traced as the opaque reference op
                return self(*inputs)

            body.__signature__ = self.signature()  # type: ignore[attr-defined]
            body.__name__ = self.name
            op: Any = torch.library.triton_op(qualified, body, mutates_args=())
            op.register_fake(self.fake_impl)
            op.register_kernel("cpu")(self.cpu_impl)

            def body_out(*args: Any, **kwargs: Any) -> None:
                names = [*self.out_names, *self.input_names, _out.WORKSPACE]
                values = [*args, *(kwargs[n] for n in names[len(args):] if n in kwargs)]
                inputs = values[len(self.outputs):len(self.outputs) + len(self.inputs)]
                if inputs[0].device.type == "cpu" and not _kernels.interpreter_on():
                    outs, _, workspace = self.split_out_args(values)
                    self.fake_out_impl(*values)  # the checks a trace can make, then the opaque reference op
                    results = self.reference_op(*inputs)
                    for out, result in zip(outs, results if isinstance(results, tuple) else (results,), strict=True):
                        out.copy_(result)
                    return
                self.call_out(*values)

            body_out.__signature__ = self.out_signature()  # type: ignore[attr-defined]
            body_out.__name__ = self.out_name
            out_op: Any = torch.library.triton_op(f"{qualified}_out", body_out,
                                                  mutates_args=(*self.out_names, _out.WORKSPACE))
            out_op.register_fake(self.fake_out_impl)
            out_op.register_kernel("cpu")(self.cpu_out_impl)
            self._out_op = out_op
        else:
            # Registered on a Library fragment directly (as vLLM's direct_register_custom_op): the custom_op
            # wrapper's Python layers would cost more than the whole fast host path.
            lib = torch.library.Library(self.namespace, "FRAGMENT")
            lib.define(f"{self.name}{self.schema()}")
            lib.impl(self.name, self.cpu_impl, "CPU")
            torch.library.register_fake(qualified, self.fake_impl, lib=lib)
            lib.define(f"{self.out_name}{out_schema}")
            lib.impl(self.out_name, self.cpu_out_impl, "CPU")
            torch.library.register_fake(f"{qualified}_out", self.fake_out_impl, lib=lib)
            if launcher is None:
                lib.impl(self.name, self, "CUDA")
                lib.impl(self.out_name, self.call_out, "CUDA")
            else:  # the C++ kernels run the call signatures they have plans for; `<op>_route` (this) the rest
                lib.define(f"{self.name}_route{self.schema()}")
                lib.impl(f"{self.name}_route", self, "CUDA")
                lib.define(f"{self.out_name}_route{out_schema}")
                lib.impl(f"{self.out_name}_route", self.call_out, "CUDA")
                self.table = int(launcher.attach(self.namespace, self.name, f"{self.name}_route", len(self.inputs)))
                launcher.attach_out(self.table, self.out_name, f"{self.out_name}_route", len(self.outputs))
                self.launcher = launcher
                if self.integer_outputs() and _launcher.bypasses_autograd():
                    # nothing to differentiate: skip autograd's fallback (the out kernel bumps the versions)
                    launcher.bypass_autograd(self.table)
                    self.autograd_bypassed = True
            self._library = lib  # a fragment's registrations live as long as the object


class Package:
    """An exported package: manifest, certificate, variants, ops; `register()` is idempotent."""

    def __init__(self, name: str, root: Path):
        self.name, self.root = name, root
        self.manifest = json.loads((root / "manifest.json").read_text())
        if self.manifest["format"] != FORMAT:
            raise ImportError(f"{name}: manifest format {self.manifest['format']}, this runtime reads {FORMAT}")
        self.certificate = json.loads((root / "certificate.json").read_text())
        self.namespace = str(self.manifest["namespace"])
        self.ops: dict[str, ExportedOp] = {}
        self.host_path: dict[str, str] = {}  # the CUDA ops' host path and why (`_launcher.select`)
        self._registered = False
        self._lock = threading.Lock()

    def _reference(self, ref: str) -> Callable[..., Any]:
        file, _, fn = ref.partition(":")
        module_name = f"{self.name}._reference_{Path(file).stem}"
        module = sys.modules.get(module_name)
        if module is None:
            spec = importlib.util.spec_from_file_location(module_name, self.root / file)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
        return getattr(module, fn)  # type: ignore[no-any-return]

    def register(self) -> None:
        """Check every op's files against the certificate and register the ops (once per process)."""
        with self._lock:
            if self._registered:
                return
            problems = _integrity.verify(self.root, self.certificate)
            allow = os.environ.get(_integrity.ALLOW_MODIFIED_ENV) == "1"
            if problems and not allow:
                raise _integrity.IntegrityError(self.name, problems)
            if problems:
                warnings.warn(f"{self.name}: registering modified code ({_integrity.ALLOW_MODIFIED_ENV}=1): "
                              + "; ".join(f"{op}: {p}" for op, ps in problems.items() for p in ps), stacklevel=2)
            variants = {vid: _kernels.load_variant(self.name, self.root, vid, meta)
                        for vid, meta in self.manifest["variants"].items()}
            launcher = None
            if any(v.backend == "cuda" for v in variants.values()):
                launcher, self.host_path = _launcher.select(self.name)
            for name, meta in self.manifest["ops"].items():
                if hasattr(getattr(torch.ops, self.namespace), name):
                    raise ImportError(f"torch.ops.{self.namespace}.{name} is already registered (another copy of "
                                      f"{self.name} imported from a different path?)")
                op = ExportedOp(self.namespace, name, meta, variants, self._reference(meta["reference"]))
                backends = {variants[v].backend for b in meta["buckets"] for v in b["variants"]}
                op.register(triton_only=backends <= {"triton"}, launcher=launcher if "cuda" in backends else None)
                self.ops[name] = op
            self._registered = True

    def workspace_bytes(self, op: str, *inputs: torch.Tensor) -> int:
        """The bytes of workspace `torch.ops.<namespace>.<op>_out` needs for these inputs (0: pass None)."""
        if op not in self.ops:
            raise KeyError(f"{self.name} has no op {op!r}; its ops: {', '.join(self.ops)}")
        return self.ops[op].workspace_bytes(inputs)

    def fallback_counts(self) -> dict[str, dict[str, int]]:
        """Per op, how many calls fell back to the reference, by reason."""
        return {name: dict(op.fallbacks) for name, op in self.ops.items()}
