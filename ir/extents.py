"""When two symbolic extents are the same: the equality the typing pass and the checks use for shapes.

Extents are IR expressions over params and dims (`BN`, `cdiv(K, BK)`, `2*BN`). Two of them are the same
when they agree for every value of the params they mention (structurally equal is enough); an extent is
one when it is 1 at sample values of the unbound dims. Results are cached per kernel.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property

from cake.ir import analysis as an
from cake.ir import nodes as n


class Extents:
    """Equality of symbolic extents for one kernel: two extents are the same when they agree for every
    value of the params they mention (structural equality is enough). Dims bound in `dims` are fixed."""

    def __init__(self, kernel: n.Kernel, dims: Mapping[str, int] | None = None):
        self.kernel = kernel
        self.dims: dict[str, int] = dict(dims or {})
        self._variations: dict[frozenset[str], tuple[an.Env, ...]] = {}
        self._same: dict[tuple[n.Expr, n.Expr], bool] = {}
        self._ones: dict[n.Expr, bool] = {}

    @cached_property
    def env(self) -> an.Env:
        """Params at their defaults, bound dims, each dtype variable at its first choice."""
        return an.default_env(self.kernel, self.dims)

    @cached_property
    def identity_envs(self) -> tuple[an.Env, ...]:
        """Defaults with unbound dims at sample values: for testing that two extents are one polynomial."""
        base = an.default_env(self.kernel)
        return tuple(base.bind(sample) for sample in an.identity_samples(self.kernel, self.dims))

    @cached_property
    def param_names(self) -> frozenset[str]:
        return frozenset(p.name for p in self.kernel.params)

    def variation_envs(self, *exprs: n.Expr | None) -> tuple[an.Env, ...]:
        """Identity envs, plus each param that `exprs` mention moved through its domain."""
        names = frozenset(e.id for expr in exprs for e in an.walk_expr(expr) if isinstance(e, n.Name)
                          ) & self.param_names
        cached = self._variations.get(names)
        if cached is None:
            envs = list(self.identity_envs)
            for name in sorted(names):
                envs.extend(self.identity_envs[0].bind({name: v}) for v in an.domain_values(self.kernel, name))
            cached = self._variations[names] = tuple(envs)
        return cached

    def same_extent(self, a: n.Expr, b: n.Expr) -> bool:
        if a == b:
            return True
        key = (a, b)
        if key not in self._same:
            self._same[key] = all(
                (va := an.try_value(a, env)) is not None and va == an.try_value(b, env)
                for env in self.variation_envs(a, b))
        return self._same[key]

    def is_one(self, extent: n.Expr) -> bool:
        if extent not in self._ones:
            self._ones[extent] = all(an.try_value(extent, env) == 1 for env in self.identity_envs)
        return self._ones[extent]
