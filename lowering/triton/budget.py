"""Shapes a Triton kernel cannot run: refused (ShapeNotSupported) before the launch, never a crash.

Two checks, both at call time. Before the launch, a lower bound on the shared memory the kernel needs: Triton
stages both operands of a `tl.dot` in shared memory, so the two operand tiles of one `mma ... via dot`, at
the bound static dims (padded as the launcher pads them), must fit the target's per-block maximum. It is a
lower bound (no pipelining stages, no layout scratch), so it refuses only what cannot fit. Whatever it misses,
Triton itself reports when it loads the compiled kernel (`OutOfResources`, raised before the kernel runs);
`TritonLauncher` turns that into the same refusal.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cake.ir import analysis as an
from cake.ir.nodes import Direction, DType, Kernel, Mma, Name, Transpose
from cake.ir.typing import type_kernel

from cake.arch import arch as arch_spec
from cake.errors import ShapeNotSupported

_TORCH_TO_IR = {"torch.float32": DType.F32, "torch.float16": DType.F16, "torch.bfloat16": DType.BF16,
                "torch.int32": DType.I32, "torch.int64": DType.I64, "torch.bool": DType.BOOL}
MIN_STATIC_EXTENT = 16  # the launcher's `_k_pad`: a static dim's tile extent is max(16, next power of two)


def padded(n: int) -> int:
    return max(MIN_STATIC_EXTENT, 1 << max(0, n - 1).bit_length())


def _operand(expr: Any) -> str | None:
    return an.ref_name(expr.operand if isinstance(expr, Transpose) else expr)


def dot_operand_bytes(kernel: Kernel, ints: Mapping[str, int], dtypes: Mapping[str, DType]) -> tuple[int, str]:
    """The largest (bytes of a + bytes of b) over the kernel's `mma`s, and which mma that is. Operand types
    come from the type table, so an operand loaded inline or bound by an untyped `let` counts too."""
    env = an.Env(dict(ints), dict(dtypes))
    typing = type_kernel(kernel)
    worst, where = 0, ""
    for launch in kernel.launches:
        for role in launch.roles:
            for site in an.walk_body(role.body):
                for expr in (e for top in an.stmt_exprs(site.stmt) for e in an.walk_expr(top)):
                    if not isinstance(expr, Mma):
                        continue
                    try:
                        total = sum(an.tile_bytes(tile, env) for tile in map(typing.tile_type, (expr.a, expr.b))
                                    if tile is not None)
                    except an.Unbound:
                        continue  # an extent the host cannot know: no estimate, Triton decides
                    if total > worst:
                        names = [_operand(expr.a), _operand(expr.b)]
                        worst, where = total, f"mma({', '.join(n or '?' for n in names)}) in launch `{launch.name}`"
    return worst, where


def shape_refusal(kernel: Kernel, arch: str, params: Mapping[str, int], statics: Mapping[str, int],
                  dtypes: Mapping[str, DType]) -> str | None:
    """Why these static dims cannot run on `arch` (the dot operands overflow shared memory), or None."""
    limit = arch_spec(arch).smem_per_block_max_bytes
    ints = {**{p.name: p.default for p in kernel.params}, **params, **{k: padded(v) for k, v in statics.items()}}
    need, where = dot_operand_bytes(kernel, ints, dtypes)
    if need <= limit:
        return None
    shape = ", ".join(f"{k}={v}" for k, v in sorted(statics.items()))
    return (f"`{kernel.name}` cannot run at {shape}: the operands of {where} need {need:,} bytes of shared memory "
            f"(tiles padded to powers of two) > {limit:,} on {arch}")


@dataclass(eq=False)
class TritonLauncher:
    """The generated launcher behind both refusals; calls through unchanged when the shape fits."""

    fn: Callable[..., Any]
    kernel: Kernel | None  # None: no schedule text to estimate from (Triton's own check still applies)
    arch: str
    params: Mapping[str, int]

    def __post_init__(self) -> None:
        self.__name__ = getattr(self.fn, "__name__", "kernel")
        # Callers find the generated module (its jit functions, `_k_compiled`) through `fn.__module__`.
        self.__module__ = getattr(self.fn, "__module__", type(self).__module__)
        # The bytes the launcher's `workspace=` takes at some inputs (the generated `<launcher>.workspace_bytes`).
        self.workspace_bytes: Callable[..., int] | None = getattr(self.fn, "workspace_bytes", None)
        self._checked: dict[tuple[Any, ...], str | None] = {}
        # The refusal per call signature (each input's shape and dtype: a superset of what `refusal` reads), so
        # a repeated call pays one tuple and one dict lookup, not the walk over the declarations (host time
        # shows at B = 1, where the GPU waits for the launches).
        self._by_call: dict[tuple[Any, ...], str | None] = {}

    def __call__(self, *inputs: Any, **given: Any) -> Any:
        """The launcher at these inputs; `given` passes its `out=` and `workspace=` through."""
        from triton.runtime.errors import OutOfResources

        if self.kernel is not None:
            key = tuple((getattr(t, "shape", None), getattr(t, "dtype", None)) for t in inputs)
            reason = self._by_call[key] if key in self._by_call else self._by_call.setdefault(key, self.refusal(inputs))
            if reason is not None:
                raise ShapeNotSupported(reason)
        try:
            return self.fn(*inputs, **given)
        except OutOfResources as error:
            raise ShapeNotSupported(f"`{self.__name__}` at input shapes {[tuple(t.shape) for t in inputs]}: "
                                    f"Triton: {error}") from error

    def refusal(self, inputs: tuple[Any, ...]) -> str | None:
        assert self.kernel is not None
        statics: dict[str, int] = {}
        dtypes: dict[str, DType] = {}
        static_names = {d.name for d in self.kernel.dims if d.static}
        decls = [t for t in self.kernel.tensors if t.direction is not Direction.OUT]
        for decl, tensor in zip(decls, inputs, strict=False):
            shape = getattr(tensor, "shape", None)
            if shape is None or len(shape) != len(decl.type.shape):
                return None  # the launcher reports the bad input
            for extent, size in zip(decl.type.shape, shape, strict=True):
                if isinstance(extent, Name) and extent.id in static_names:
                    statics[extent.id] = int(size)
            elem, got = decl.type.elem, _TORCH_TO_IR.get(str(getattr(tensor, "dtype", "")))
            if not isinstance(elem, DType) and got is not None:
                dtypes.setdefault(elem.name, got)
        key = (tuple(sorted(statics.items())), tuple(sorted((k, v.value) for k, v in dtypes.items())))
        if key not in self._checked:
            self._checked[key] = shape_refusal(self.kernel, self.arch, self.params, statics, dtypes)
        return self._checked[key]
