"""Learned rules: static checks that are data, with provenance, loaded into the checker's registry.

A failure distiller finds recurring failure signatures, proposes a predicate over *IR facts* (`facts`),
validates it on a corpus and writes the rule as JSON. The checker runs it like any built-in check.

A rule (one JSON object; a file holds one object, a list, or `{"rules": [...]}`)::

    {
      "id": "L-0007",
      "title": "cp.async pipelines on Hopper lose to TMA",
      "message": "cp.async copies on {target} with {smem_bytes} bytes of shared memory",
      "predicate": {"all": [{"feature": "copy_kinds", "op": "contains", "value": "cp_async"},
                            {"feature": "target", "eq": "sm_90a"}]},
      "severity": "warning",                  # error | warning | note (default error)
      "help": "use `via tma` with an mbarrier",  # optional
      "enabled": true,
      "provenance": {"candidates": ["run3/c0142", "run3/c0187"], "counts": {"failures": 14, "corpus": 380},
                     "validation": {"precision": 1.0, "recall": 0.82, "false_positives": 0},
                     "created_at": "2026-11-30T12:00:00Z"}
    }

Predicates: `{"all": [...]}`, `{"any": [...]}`, `{"not": P}`, or a leaf on one fact:
`{"feature": F, "op": OP, "value": V}` with OP one of `== != > >= < <= in contains exists`, or the
shorthand `{"feature": F, "eq": V}` (also `ne gt ge lt le in contains`). `in` tests the fact against a
list; `contains` tests a list-valued fact (copy kinds, mma forms, ...) for a member, and `eq` on a
list-valued fact means `contains`. A leaf on a fact the kernel lacks is false (`exists` tests for it).
The message is a template over the facts (`{smem_bytes}`).
"""

from __future__ import annotations

import json
import math
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cake.ir import analysis as an
from cake.ir import nodes as n
from cake.ir.checks.context import CheckContext
from cake.ir.checks.registry import REGISTRY, CheckSpec, Family, Finding, register

from cake.diagnostics import Severity, Span

FactValue = int | float | str | bool | tuple[str, ...]
RULE_ID = re.compile(r"L-[0-9A-Za-z]{4,}")


# ------------------------------------------------------------------------------------------------- facts


def facts(kernel: n.Kernel, arch: str | None = None, dims: Mapping[str, int] | None = None) -> dict[str, FactValue]:
    """The IR facts a learned predicate may test, for `kernel` checked against `arch` (default: its target).

    Scalars are at the params' defaults; sizes are the worst over launches and dtype choices; facts that
    need an unbound dim are absent. Names (`FACT_DOCS` documents each):
    """
    return _facts(CheckContext(kernel, arch or kernel.target, None, dims))


FACT_DOCS: dict[str, str] = {
    "target": "the kernel's declared target (sm_80, sm_90a, ...)",
    "arch": "the target checked against",
    "op": "the op contract it implements",
    "param.NAME": "each param's default value",
    "dtypes": "element types the dtype variables may take",
    "launches": "number of launches",
    "roles": "most roles in one launch",
    "role_instances": "most role instances (replicas expanded) in one launch",
    "warp_specialized": "some launch has several roles or a replicated role",
    "pingpong": "some launch uses pingpong",
    "grid_kind": "tiles | persistent (persistent if any launch is)",
    "threads": "most threads per block over launches",
    "regs_max": "largest declared per-thread register budget (0 if none)",
    "regs_total": "largest per-launch register total when some role declares regs",
    "smem_bytes": "largest shared memory per block (bytes, worst dtype)",
    "tmem_columns": "largest tensor-memory allocation (columns)",
    "mbarriers": "most mbarrier objects in one launch",
    "stages": "largest pipeline stage count (pipelined loops and staged buffers)",
    "copy_kinds": "copy mechanisms used (load, cp_async, tma)",
    "mma_forms": "mma instruction forms used (dot, wgmma.m64n128k16, ...)",
    "mma_families": "mma instruction families used (dot, mma_sync, wgmma, tcgen05)",
    "swizzles": "shared-memory swizzles used (none, 32B, 64B, 128B)",
    "masked_all": "every global access with a tile slice is masked",
}


def _max_or_none(values: Iterable[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _facts(ctx: CheckContext) -> dict[str, FactValue]:
    k = ctx.kernel
    env = ctx.env
    out: dict[str, FactValue] = {"target": k.target, "arch": ctx.arch_name, "op": k.op}
    for p in k.params:
        out[f"param.{p.name}"] = p.default
    out["dtypes"] = tuple(sorted({d.value for dv in k.dtype_vars for d in dv.choices}))
    out["launches"] = len(k.launches)
    out["roles"] = max((len(la.roles) for la in k.launches), default=0)
    instances = _max_or_none(an.try_value_of(lambda e, la=la: sum(an.role_replicas(r, e) for r in la.roles), env)
                             for la in k.launches)
    if instances is not None:
        out["role_instances"] = instances
    out["warp_specialized"] = any(an.is_warp_specialized(la) for la in k.launches)
    out["pingpong"] = any(la.pingpongs for la in k.launches)
    out["grid_kind"] = ("persistent" if any(la.grid.kind is n.GridKind.PERSISTENT for la in k.launches)
                        else "tiles")
    threads = _max_or_none(an.try_value_of(lambda e, la=la: an.launch_threads(la, e), env) for la in k.launches)
    if threads is not None:
        out["threads"] = threads
    out["regs_max"] = _max_or_none(an.try_value(r.regs, env) for la in k.launches for r in la.roles) or 0
    if ctx.arch is not None:
        arch = ctx.arch
        totals = [an.try_value_of(lambda e, la=la: sum(r.total for r in an.register_budget(la, e, arch)), env)
                  for la in k.launches if any(r.regs is not None for r in la.roles)]
        if totals and None not in totals:
            out["regs_total"] = max(t for t in totals if t is not None)
    smem = [an.try_value_of(lambda e, la=la: an.smem_layout(la, e).total_bytes, benv)
            for la in k.launches for benv in ctx.budget_envs]
    if smem and None not in smem:
        out["smem_bytes"] = max(v for v in smem if v is not None)
    tmem = [an.try_value_of(lambda e, la=la: an.tmem_usage(la, e).columns_allocated, benv)
            for la in k.launches for benv in ctx.budget_envs]
    if tmem and None not in tmem:
        out["tmem_columns"] = max(v for v in tmem if v is not None)
    out["mbarriers"] = _max_or_none(
        sum(1 if b.count is None else (an.try_value(b.count, env) or 0) for b in la.barriers)
        for la in k.launches) or 0
    stages: list[int | None] = []
    copy_kinds: set[str] = set()
    masked = True
    for la in k.launches:
        stages.extend(an.try_value(s.stages, env) for s in la.smem if s.stages is not None)
        for role in la.roles:
            for site in an.walk_body(role.body):
                stmt = site.stmt
                if isinstance(stmt, n.For) and stmt.pipeline is not None:
                    stages.append(an.try_value(stmt.pipeline.stages, env))
                if isinstance(stmt, n.Copy):
                    copy_kinds.add(stmt.kind.value)
                if isinstance(stmt, (n.Copy, n.Store, n.Atomic)) and not stmt.masked and _has_tile_slice(
                        stmt.source if isinstance(stmt, n.Copy) else stmt.dest):
                    masked = False
                for expr in an.stmt_exprs(stmt):
                    for e in an.walk_expr(expr):
                        if isinstance(e, n.Load):
                            copy_kinds.add("load")
                            if not e.masked and _has_tile_slice(e.source):
                                masked = False
    out["stages"] = _max_or_none(stages) or 1
    out["copy_kinds"] = tuple(sorted(copy_kinds))
    forms = {m.form for m in ctx.typing.mmas}
    out["mma_forms"] = tuple(sorted(forms))
    out["mma_families"] = tuple(sorted({f.partition(".")[0] for f in forms}))
    out["swizzles"] = tuple(sorted({s.swizzle.value for la in k.launches for s in la.smem}))
    out["masked_all"] = masked
    return out


def _has_tile_slice(ref: n.Expr) -> bool:
    return isinstance(ref, n.Index) and any(isinstance(i, n.Slice) and i.size is not None for i in ref.items)


# --------------------------------------------------------------------------------------------- predicates


class RuleFormatError(ValueError):
    """A rule (or rule file) that does not follow the format above."""


_OPS = ("==", "!=", ">", ">=", "<", "<=", "in", "contains", "exists")
_SHORTHAND = {"eq": "==", "ne": "!=", "gt": ">", "ge": ">=", "lt": "<", "le": "<=", "in": "in",
              "contains": "contains"}


@dataclass(frozen=True, slots=True)
class Leaf:
    feature: str
    op: str
    value: Any = None

    def holds(self, fx: Mapping[str, FactValue]) -> bool:
        if self.op == "exists":
            return self.feature in fx
        if self.feature not in fx:
            return False
        fact = fx[self.feature]
        op = "contains" if self.op == "==" and isinstance(fact, tuple) else self.op
        if op == "contains":
            return isinstance(fact, tuple) and self.value in fact
        if op == "in":
            return fact in self.value
        if op == "==":
            return bool(fact == self.value)
        if op == "!=":
            return bool(fact != self.value)
        if isinstance(fact, (tuple, str, bool)) or not isinstance(self.value, (int, float)):
            return False
        return {">": fact > self.value, ">=": fact >= self.value, "<": fact < self.value,
                "<=": fact <= self.value}[op]

    def describe(self, fx: Mapping[str, FactValue]) -> str:
        shown = fx.get(self.feature, "absent")
        return f"{self.feature} = {'{' + ', '.join(shown) + '}' if isinstance(shown, tuple) else shown}"


@dataclass(frozen=True, slots=True)
class All:
    parts: tuple[Predicate, ...]

    def holds(self, fx: Mapping[str, FactValue]) -> bool:
        return all(p.holds(fx) for p in self.parts)


@dataclass(frozen=True, slots=True)
class AnyOf:
    parts: tuple[Predicate, ...]

    def holds(self, fx: Mapping[str, FactValue]) -> bool:
        return any(p.holds(fx) for p in self.parts)


@dataclass(frozen=True, slots=True)
class Not:
    part: Predicate

    def holds(self, fx: Mapping[str, FactValue]) -> bool:
        return not self.part.holds(fx)


Predicate = Leaf | All | AnyOf | Not


def predicate_from_json(obj: object, where: str = "predicate") -> Predicate:
    if not isinstance(obj, dict):
        raise RuleFormatError(f"{where}: expected an object, got {type(obj).__name__}")
    if "all" in obj or "any" in obj:
        key = "all" if "all" in obj else "any"
        parts = obj[key]
        if not isinstance(parts, list) or not parts:
            raise RuleFormatError(f"{where}.{key}: expected a non-empty list")
        built = tuple(predicate_from_json(p, f"{where}.{key}[{i}]") for i, p in enumerate(parts))
        return All(built) if key == "all" else AnyOf(built)
    if "not" in obj:
        return Not(predicate_from_json(obj["not"], f"{where}.not"))
    feature = obj.get("feature")
    if not isinstance(feature, str) or not feature:
        raise RuleFormatError(f"{where}: a leaf needs a string `feature`")
    if "op" in obj:
        op = obj["op"]
        if op not in _OPS:
            raise RuleFormatError(f"{where}: unknown op {op!r} (known: {', '.join(_OPS)})")
        if op != "exists" and "value" not in obj:
            raise RuleFormatError(f"{where}: op {op!r} needs a `value`")
        value = obj.get("value")
    else:
        short = [k for k in obj if k in _SHORTHAND]
        if len(short) != 1:
            raise RuleFormatError(f"{where}: a leaf needs `op` and `value`, or one of "
                                  f"{', '.join(_SHORTHAND)}")
        op, value = _SHORTHAND[short[0]], obj[short[0]]
    if op == "in" and not isinstance(value, list):
        raise RuleFormatError(f"{where}: `in` needs a list value")
    if op in (">", ">=", "<", "<=") and (isinstance(value, bool) or not isinstance(value, (int, float))
                                         or not math.isfinite(value)):
        raise RuleFormatError(f"{where}: {op} needs a finite number")
    return Leaf(feature, op, tuple(value) if isinstance(value, list) else value)


def predicate_to_json(p: Predicate) -> dict[str, Any]:
    if isinstance(p, All):
        return {"all": [predicate_to_json(x) for x in p.parts]}
    if isinstance(p, AnyOf):
        return {"any": [predicate_to_json(x) for x in p.parts]}
    if isinstance(p, Not):
        return {"not": predicate_to_json(p.part)}
    leaf: dict[str, Any] = {"feature": p.feature, "op": p.op}
    if p.op != "exists":
        leaf["value"] = list(p.value) if isinstance(p.value, tuple) else p.value
    return leaf


def leaves(p: Predicate) -> Iterable[Leaf]:
    if isinstance(p, Leaf):
        yield p
    elif isinstance(p, (All, AnyOf)):
        for part in p.parts:
            yield from leaves(part)
    else:
        yield from leaves(p.part)


# -------------------------------------------------------------------------------------------------- rules


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    title: str
    message: str
    predicate: Predicate
    severity: Severity = Severity.ERROR
    help: str | None = None
    enabled: bool = True
    provenance: Mapping[str, Any] = field(default_factory=dict)

    def matches(self, fx: Mapping[str, FactValue]) -> bool:
        return self.predicate.holds(fx)


def rule_from_json(obj: object) -> Rule:
    if not isinstance(obj, dict):
        raise RuleFormatError(f"a rule is a JSON object, got {type(obj).__name__}")
    missing = [k for k in ("id", "title", "message", "predicate") if k not in obj]
    if missing:
        raise RuleFormatError(f"rule {obj.get('id', '?')}: missing {', '.join(missing)}")
    rid = obj["id"]
    if not isinstance(rid, str) or not RULE_ID.fullmatch(rid):
        raise RuleFormatError(f"rule id {rid!r}: learned rule ids look like L-0001")
    for key in ("title", "message"):
        if not isinstance(obj[key], str):
            raise RuleFormatError(f"rule {rid}: `{key}` must be a string")
    try:
        severity = Severity(obj.get("severity", "error"))
    except ValueError:
        raise RuleFormatError(f"rule {rid}: severity must be error, warning or note") from None
    provenance = obj.get("provenance", {})
    if not isinstance(provenance, dict):
        raise RuleFormatError(f"rule {rid}: `provenance` must be an object")
    help_text = obj.get("help")
    return Rule(rid, obj["title"], obj["message"], predicate_from_json(obj["predicate"], f"rule {rid}.predicate"),
                severity, help_text if isinstance(help_text, str) else None, bool(obj.get("enabled", True)),
                provenance)


def rule_to_json(rule: Rule) -> dict[str, Any]:
    out: dict[str, Any] = {"id": rule.id, "title": rule.title, "message": rule.message,
                           "predicate": predicate_to_json(rule.predicate), "severity": rule.severity.value,
                           "enabled": rule.enabled, "provenance": dict(rule.provenance)}
    if rule.help is not None:
        out["help"] = rule.help
    return out


def load_rules(path: str | Path) -> tuple[Rule, ...]:
    """Rules from a JSON file (one rule, a list, or {"rules": [...]}). Raises RuleFormatError / OSError."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise RuleFormatError(f"{Path(path).name}: not JSON ({error.msg}, line {error.lineno})") from None
    items = data.get("rules", [data]) if isinstance(data, dict) and "id" not in data else data
    if isinstance(data, dict) and "id" in data:
        items = [data]
    if not isinstance(items, list):
        raise RuleFormatError(f"{Path(path).name}: expected a rule, a list of rules or {{\"rules\": [...]}}")
    rules = tuple(rule_from_json(item) for item in items)
    seen: set[str] = set()
    for rule in rules:
        if rule.id in seen:
            raise RuleFormatError(f"{Path(path).name}: rule {rule.id} appears twice")
        seen.add(rule.id)
    return rules


class _Facts(string.Formatter):
    def get_value(self, key: int | str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        if isinstance(key, str):
            value = kwargs.get(key, f"<{key}?>")
            return ", ".join(value) if isinstance(value, tuple) else value
        return f"<{key}?>"


def _render_message(template: str, fx: Mapping[str, FactValue]) -> str:
    try:
        return _Facts().format(template, **{**{k.replace(".", "_"): v for k, v in fx.items()}, **fx})
    except (ValueError, IndexError, AttributeError, KeyError):
        return template


def as_check(rule: Rule) -> CheckSpec:
    """The rule as a registry entry: it computes the facts once and tests its predicate."""

    def run(ctx: CheckContext) -> Iterable[Finding]:
        fx = ctx.__dict__.get("_rule_facts")
        if fx is None:
            fx = _facts(ctx)
            ctx.__dict__["_rule_facts"] = fx
        if not rule.matches(fx):
            return
        span = ctx.kernel.span
        label = "; ".join(sorted({leaf.describe(fx) for leaf in leaves(rule.predicate)}))
        yield Finding(Span.point(span.line, span.column) if span else None, {"text": _render_message(rule.message, fx)},
                      f"schedule `{ctx.kernel.name}`", label, rule.help,
                      (f"learned rule {rule.id}: {rule.title}",), rule.severity)

    return CheckSpec(rule.id, rule.title, "{text}", Family.LEARNED, run, (), severity=rule.severity,
                     provenance=rule.provenance)


def rule_checks(rules: Iterable[Rule]) -> tuple[CheckSpec, ...]:
    """Registry entries for the enabled rules (pass to `check(..., rules=...)`)."""
    return tuple(as_check(r) for r in rules if r.enabled)


def register_rules(rules: Iterable[Rule], registry: dict[str, CheckSpec] | None = None) -> tuple[CheckSpec, ...]:
    """Add the enabled rules to the process-wide registry (or `registry`), next to the built-in checks."""
    return tuple(register(spec, REGISTRY if registry is None else registry) for spec in rule_checks(rules))
