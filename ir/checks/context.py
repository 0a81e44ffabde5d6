"""What every check sees: the kernel, the target's limits, the backend, and analyses computed once.

Analyses are cached per context, so the checks of one `check()` call share one type inference, one
barrier accounting and one happens-before graph per launch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cached_property
from typing import TypeVar

from cake.ir import analysis as an
from cake.ir.checks.registry import Backend, Finding
from cake.ir.extents import Extents
from cake.ir.nodes import DType, Expr, Kernel, Launch
from cake.ir.typing import Typing, type_kernel

from cake.arch import ARCHS, ArchSpec

T = TypeVar("T")


class CheckContext:
    """Inputs and shared analyses of one check run.

    `dims` binds symbolic dims (usually the static ones) to representative sizes; budgets that depend on
    an unbound dim cannot be proven and are reported as notes, never guessed.
    """

    def __init__(self, kernel: Kernel, arch_name: str, backend: Backend | None,
                 dims: Mapping[str, int] | None = None):
        self.kernel = kernel
        self.arch_name = arch_name
        self.arch: ArchSpec | None = ARCHS.get(arch_name)
        self.backend = backend
        self.dims: dict[str, int] = dict(dims or {})
        self.extents = Extents(kernel, self.dims)
        self._launch_cache: dict[tuple[str, int], object] = {}

    # ------------------------------------------------------------------------------------ environments

    @cached_property
    def dtype_bindings(self) -> tuple[dict[str, DType], ...]:
        return an.dtype_bindings(self.kernel)

    @property
    def env(self) -> an.Env:
        """Params at their defaults, bound dims, each dtype variable at its first choice."""
        return self.extents.env

    @cached_property
    def budget_envs(self) -> tuple[an.Env, ...]:
        """The defaults under every dtype binding: a schedule must fit for every dtype it serves."""
        return tuple(an.default_env(self.kernel, self.dims, b) for b in self.dtype_bindings)

    @property
    def identity_envs(self) -> tuple[an.Env, ...]:
        """Defaults with unbound dims at sample values: for testing that two extents are one polynomial."""
        return self.extents.identity_envs

    def variation_envs(self, *exprs: Expr | None) -> tuple[an.Env, ...]:
        """Identity envs, plus each param that `exprs` mention moved through its domain."""
        return self.extents.variation_envs(*exprs)

    def same_extent(self, a: Expr, b: Expr) -> bool:
        """Two extents agree for every param value in their domains (structurally equal is enough)."""
        return self.extents.same_extent(a, b)

    def is_one(self, extent: Expr) -> bool:
        return self.extents.is_one(extent)

    # --------------------------------------------------------------------------------------- analyses

    @cached_property
    def typing(self) -> Typing:
        """The kernel's type table (`cake.ir.typing`), sharing this context's extent comparisons."""
        return type_kernel(self.kernel, extents=self.extents)

    def type_findings(self, code: str) -> tuple[Finding, ...]:
        """The typing pass's problems owned by check `code`, as findings."""
        return tuple(Finding(p.span, p.fields, p.subject, p.label, p.help) for p in self.typing.problems_of(code))

    def barrier_sites(self, launch: Launch) -> tuple[an.BarrierSite, ...] | None:
        """The launch's barrier uses, or None when its role instances cannot be expanded (unbound counts)."""
        return self._per_launch("sites", launch, lambda: an.barrier_sites(launch, self.identity_envs[0]))

    def happens_before(self, launch: Launch) -> an.HappensBefore | None:
        return self._per_launch("hb", launch, lambda: an.happens_before(launch, self.identity_envs[0]))

    def _per_launch(self, key: str, launch: Launch, compute: Callable[[], T]) -> T | None:
        slot = (key, id(launch))
        if slot not in self._launch_cache:
            try:
                self._launch_cache[slot] = compute()
            except an.Unbound:
                self._launch_cache[slot] = None
        return self._launch_cache[slot]  # type: ignore[return-value]
