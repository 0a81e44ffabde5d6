"""Per-launch codegen state shared by the role generators, the dialect and the kernel assembler."""

from __future__ import annotations

from dataclasses import dataclass, field

from cake.ir import analysis as an
from cake.ir.nodes import DType, ElemType, Kernel, Launch, ScratchDecl, SmemDecl, TensorDecl, TmemDecl
from cake.ir.typing import Typing
from cake.lowering.cuda.layouts import FragLayout, SmemTileLayout
from cake.lowering.cuda.mma_wrappers import Wrapper
from cake.lowering.cuda.plan import LaunchPlan, NamedBarriers, RoleSlot, SmemAllocator, stage_layout

from cake.arch import ArchSpec
from cake.diagnostics import Diagnostic


@dataclass(frozen=True, slots=True)
class TmaMap:
    """One CUtensorMap the host encodes: over `tensor` (dims innermost first), box and swizzle."""

    field: str  # member of the kernel's argument block
    tensor: str
    dtype: DType
    rank: int
    box: tuple[int, ...]  # innermost first
    swizzle_bytes: int
    align_bytes: int  # the global base and row strides must be multiples of this (the target's TMA rule)


@dataclass(slots=True)
class LaunchCtx:
    kernel: Kernel
    launch: Launch
    plan: LaunchPlan
    arch: ArchSpec
    env: an.Env
    file: str
    kname: str  # the __global__ function's name
    smem: SmemAllocator
    named: NamedBarriers
    typing: Typing  # the kernel's type table (cake.ir.typing)
    diags: list[Diagnostic] = field(default_factory=list)
    tmaps: dict[tuple[str, tuple[int, ...], int], TmaMap] = field(default_factory=dict)
    layouts: dict[str, FragLayout] = field(default_factory=dict)
    offset_fns: dict[str, str] = field(default_factory=dict)  # C function name -> definition
    mma_wrappers: dict[str, Wrapper] = field(default_factory=dict)  # generated tensor-core wrappers called
    tmem_cols: int = 0
    tmem_offsets: dict[str, int] = field(default_factory=dict)
    tmem_slot_offset: int | None = None
    role_bars: dict[tuple[str, int], int] = field(default_factory=dict)
    pingpong_bars: dict[str, int] = field(default_factory=dict)
    # The launch runs inside another launch's kernel (`fuse`): the block has more threads than its roles, so a
    # barrier over all of them is a named barrier, never __syncthreads (the other threads never reach it).
    fused: bool = False
    block_bar: int | None = None
    cluster_ctas: int = 1  # CTAs in one of the launch's clusters (`cluster AXIS SIZE`); 1 without one

    # ---- declarations -----------------------------------------------------------------------------

    def dtype(self, elem: ElemType) -> DType:
        resolved = an.resolve_elem(elem, self.env)
        if resolved is None:
            raise KeyError(f"dtype variable `{getattr(elem, 'name', elem)}` is not bound")
        return resolved

    def tensor(self, name: str) -> TensorDecl | ScratchDecl | None:
        t = self.kernel.tensor(name)
        if t is not None:
            return t
        return next((s for s in self.kernel.scratch if s.name == name), None)

    def smem_decl(self, name: str) -> SmemDecl | None:
        return next((s for s in self.launch.smem if s.name == name), None)

    def tmem_decl(self, name: str) -> TmemDecl | None:
        return next((t for t in self.launch.tmem if t.name == name), None)

    def int_of(self, expr: object) -> int:
        return an.value(expr, self.env)  # type: ignore[arg-type]

    def smem_layout_of(self, decl: SmemDecl) -> SmemTileLayout:
        return stage_layout(decl, self.env)

    def offset_fn(self, name: str, layout: SmemTileLayout) -> str:
        fn = f"{name}_off"
        self.offset_fns.setdefault(fn, layout.offset_fn(fn))
        return fn

    def block_sync(self) -> str:
        """A barrier over every thread of this launch's roles."""
        if not self.fused:
            return "__syncthreads();"
        if self.block_bar is None:
            self.block_bar = self.named.take(f"launch {self.launch.name} sync")
        return f"cake_named_bar_sync({self.block_bar}, {self.plan.threads});"

    def role_bar(self, slot: RoleSlot, instance_expr: str) -> str:
        """The named barrier id (C expr) that syncs one instance of `slot`'s role."""
        if (slot.name, 0) not in self.role_bars:
            for i in range(slot.replicas):
                self.role_bars[(slot.name, i)] = self.named.take(f"{slot.name}[{i}] sync")
        base = self.role_bars[(slot.name, 0)]
        return str(base) if slot.replicas == 1 else f"({base} + {instance_expr})"

    def tmap(self, tensor: str, dtype: DType, rank: int, box: tuple[int, ...], swizzle: int) -> TmaMap:
        key = (tensor, box, swizzle)
        if key not in self.tmaps:
            fieldname = f"tmap_{tensor}" if not any(k[0] == tensor for k in self.tmaps) else \
                f"tmap_{tensor}_{sum(1 for k in self.tmaps if k[0] == tensor)}"
            self.tmaps[key] = TmaMap(fieldname, tensor, dtype, rank, box, swizzle, self.arch.tma_alignment_bytes)
        return self.tmaps[key]
