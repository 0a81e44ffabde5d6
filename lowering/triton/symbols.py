"""The kernel-wide names of the generated module: tensors (pointer and stride arguments), dims, params
and dtype variables, each with the spelling the Triton source uses."""

from __future__ import annotations

from dataclasses import dataclass

from cake.ir.analysis import Env
from cake.ir.nodes import DType, ElemType, Expr, Kernel, TypeVar
from cake.ir.typing import Typing, type_kernel
from cake.ir.visit import identifiers
from cake.lowering.triton.names import Namer


@dataclass(frozen=True, slots=True)
class TensorSym:
    name: str  # schedule name
    host: str  # the launcher's variable
    ptr: str  # kernel argument: the base pointer
    strides: tuple[str, ...]  # kernel arguments: runtime strides, in elements (never assume contiguity)
    aligned: str  # kernel argument (constexpr): the launcher's `_k_aligned` of this tensor (see kernel_fn)
    shape: tuple[Expr, ...]
    elem: ElemType
    scratch: bool = False


@dataclass(frozen=True, slots=True)
class DimSym:
    name: str
    code: str
    static: bool  # a tl.constexpr; `p2` is its padded power-of-two extent (also a constexpr)
    p2: str | None = None
    divisible: str | None = None  # a runtime dim's constexpr flag: its value is a multiple of 16 (kernel_fn)


@dataclass(frozen=True, slots=True)
class ParamSym:
    name: str
    code: str
    value: int


@dataclass(frozen=True, slots=True)
class TypeVarSym:
    name: str
    code: str
    choices: tuple[DType, ...]
    source: str | None  # a tensor declared with this dtype variable: its pointer's element type is the dtype

    @property
    def may_be_16bit(self) -> bool:
        return any(c in (DType.F16, DType.BF16) for c in self.choices)


class Symbols:
    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self.namer = Namer()
        for ident in sorted(identifiers(kernel)):  # reserved up front: no generated name captures one
            self.namer.user(ident)
        self.params = {p.name: ParamSym(p.name, self.namer.user(p.name), p.default) for p in kernel.params}
        self.dims = {d.name: DimSym(d.name, self.namer.user(d.name), d.static,
                                    self.namer.claim(f"{d.name}_P2") if d.static else None,
                                    None if d.static else self.namer.claim(f"DIV16_{d.name}"))
                     for d in kernel.dims}
        self.tensors: dict[str, TensorSym] = {}
        for decl in kernel.tensors:
            self._tensor(decl.name, decl.type.shape, decl.type.elem, scratch=False)
        for scratch in kernel.scratch:
            self._tensor(scratch.name, scratch.type.shape, scratch.type.elem, scratch=True)
        self.typevars = {v.name: TypeVarSym(v.name, self.namer.user(v.name), v.choices, self._source(v.name))
                         for v in kernel.dtype_vars}
        self.env = Env({name: p.value for name, p in self.params.items()})
        # The IR's one type table for this kernel object: what a `let` without a declared type holds.
        self.typing: Typing = type_kernel(kernel)

    @property
    def float_vars(self) -> frozenset[str]:
        return frozenset(name for name, v in self.typevars.items() if all(c.is_float for c in v.choices))

    def _tensor(self, name: str, shape: tuple[Expr, ...], elem: ElemType, scratch: bool) -> None:
        ptr = self.namer.claim(f"{name}_ptr")
        strides = tuple(self.namer.claim(f"stride_{name}{i}") for i in range(len(shape)))
        aligned = self.namer.claim(f"ALIGNED_{name}")
        self.tensors[name] = TensorSym(name, self.namer.user(name), ptr, strides, aligned, shape, elem, scratch)

    def _source(self, var: str) -> str | None:
        return next((t.name for t in self.tensors.values() if isinstance(t.elem, TypeVar) and t.elem.name == var),
                    None)
