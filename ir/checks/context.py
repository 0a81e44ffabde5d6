"""What every check sees: the kernel, the target's limits, the backend, and analyses computed once.

Analyses are cached per context, so the checks of one `check()` call share one type inference, one
barrier accounting and one happens-before graph per launch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cached_property
from typing import TYPE_CHECKING, TypeVar

from cake.ir import analysis as an
from cake.ir.checks.registry import Backend
from cake.ir.nodes import DType, Expr, Kernel, Launch, Name

from cake.arch import ARCHS, ArchSpec

if TYPE_CHECKING:
    from cake.ir.checks.infer import Typing

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
        self._launch_cache: dict[tuple[str, int], object] = {}
        self._variations: dict[frozenset[str], tuple[an.Env, ...]] = {}
        self._same: dict[tuple[Expr, Expr], bool] = {}
        self._ones: dict[Expr, bool] = {}

    # ------------------------------------------------------------------------------------ environments

    @cached_property
    def dtype_bindings(self) -> tuple[dict[str, DType], ...]:
        return an.dtype_bindings(self.kernel)

    @cached_property
    def env(self) -> an.Env:
        """Params at their defaults, bound dims, each dtype variable at its first choice."""
        return an.default_env(self.kernel, self.dims)

    @cached_property
    def budget_envs(self) -> tuple[an.Env, ...]:
        """The defaults under every dtype binding: a schedule must fit for every dtype it serves."""
        return tuple(an.default_env(self.kernel, self.dims, b) for b in self.dtype_bindings)

    @cached_property
    def identity_envs(self) -> tuple[an.Env, ...]:
        """Defaults with unbound dims at sample values: for testing that two extents are one polynomial."""
        base = an.default_env(self.kernel)
        return tuple(base.bind(sample) for sample in an.identity_samples(self.kernel, self.dims))

    @cached_property
    def param_names(self) -> frozenset[str]:
        return frozenset(p.name for p in self.kernel.params)

    def variation_envs(self, *exprs: Expr | None) -> tuple[an.Env, ...]:
        """Identity envs, plus each param that `exprs` mention moved through its domain."""
        names = frozenset(e.id for expr in exprs for e in an.walk_expr(expr) if isinstance(e, Name)
                          ) & self.param_names
        cached = self._variations.get(names)
        if cached is None:
            envs = list(self.identity_envs)
            for name in sorted(names):
                envs.extend(self.identity_envs[0].bind({name: v}) for v in an.domain_values(self.kernel, name))
            cached = self._variations[names] = tuple(envs)
        return cached

    def same_extent(self, a: Expr, b: Expr) -> bool:
        """Two extents agree for every param value in their domains (structurally equal is enough)."""
        if a == b:
            return True
        key = (a, b)
        if key not in self._same:
            self._same[key] = all(
                (va := an.try_value(a, env)) is not None and va == an.try_value(b, env)
                for env in self.variation_envs(a, b))
        return self._same[key]

    def is_one(self, extent: Expr) -> bool:
        if extent not in self._ones:
            self._ones[extent] = all(an.try_value(extent, env) == 1 for env in self.identity_envs)
        return self._ones[extent]

    # --------------------------------------------------------------------------------------- analyses

    @cached_property
    def typing(self) -> Typing:
        from cake.ir.checks.infer import infer

        return infer(self)

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
