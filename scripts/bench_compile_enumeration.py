"""Enumeration: does every schedule the checker accepts compile? (issue 12, "Must show")

    python scripts/bench_compile_enumeration.py [--sample N --seed S] [--out enumeration.json]

For every shipped schedule that targets sm_80, sm_90a or sm_100a, variants are built one change at a time
from the schedule as written: each value of each param's domain, each choice of each dtype variable, and
each mma width N the target's table lists for a committed form (`wgmma.m64nNk16`, `tcgen05.m128nNk16`), once
at the defaults and once with the param that sizes the mma's columns set to N (its domain widened to hold N:
the `BK = 96` with `wgmma.m64n96k16` case). Each variant is judged as the CUDA backend's pipeline would:

* refused  — `cake check --backend cuda` (static dims bound) reports errors, every one located (a span);
* compiled — the checker accepts, codegen lowers it and nvcc compiles it for the target;
* failed   — anything else: accepted but codegen refused it, accepted but nvcc failed, or an unlocated
  refusal. The target is zero failures.

`--sample N` compiles a seeded sample of N accepted variants (every variant is still checked and lowered);
without it every accepted variant is compiled. Prints the counts and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from cake.experiments.schedules import shipped_schedule_paths
from cake.ir import analysis as an
from cake.ir import nodes as n
from cake.ir.parser import parse
from cake.lowering.cuda.backend import PASSES
from cake.lowering.cuda.compile import CompileError, compile_cubin
from cake.lowering.cuda.errors import LoweringError
from cake.lowering.cuda.program import DEFAULT_STATIC_DIM, generate
from cake.lowering.pipeline import LowerContext, run_passes

from cake.arch import ARCHS, MmaFamily
from cake.diagnostics import Diagnostic, DiagnosticError

TARGETS = ("sm_80", "sm_90a", "sm_100a")
ROOT = Path(__file__).resolve().parent
_FORM = re.compile(r"\b(mma_sync|wgmma|tcgen05)\.m(\d+)n(\d+)k(\d+)\b")


@dataclass(frozen=True, slots=True)
class Variant:
    schedule: str  # path relative to the repository
    label: str  # what changed, e.g. "BK=96" or "wgmma.m64n96k16 BK=96"
    text: str
    params: tuple[tuple[str, int], ...] = ()  # defaults to set (domains widened to hold them)
    dtypes: tuple[tuple[str, str], ...] = ()  # dtype variables narrowed to one choice

    def kernel(self) -> n.Kernel:
        kernel = parse(self.text, self.schedule)
        values = dict(self.params)
        params = []
        for p in kernel.params:
            if p.name in values:
                v = values[p.name]
                domain = p.domain
                if v not in _domain(p):
                    domain = n.ValueSet(tuple(sorted({*_domain(p), v})))
                p = replace(p, default=v, domain=domain)
            params.append(p)
        only = dict(self.dtypes)
        dtype_vars = tuple(replace(d, choices=(n.DType(only[d.name]),)) if d.name in only else d
                           for d in kernel.dtype_vars)
        return replace(kernel, params=tuple(params), dtype_vars=dtype_vars)


@dataclass(slots=True)
class Outcome:
    schedule: str
    label: str
    arch: str
    verdict: str  # refused | accepted | compiled | failed
    why: str = ""  # the first diagnostic code(s), or what failed
    codes: list[str] = field(default_factory=list)


def _domain(p: n.Param) -> tuple[int, ...]:
    if isinstance(p.domain, n.ValueSet):
        return p.domain.values
    return tuple(range(p.domain.start, p.domain.stop))


def _column_param(kernel: n.Kernel, form: str) -> str | None:
    """The param that alone sizes the columns of the mmas committed to `form` (None when there is none)."""
    names: set[str] = set()
    for launch in kernel.launches:
        tmem = {t.name: t for t in launch.tmem}
        for role in launch.roles:
            for site in an.walk_body(role.body):
                st = site.stmt
                shape: tuple[n.Expr, ...] | None = None
                if isinstance(st, n.Let) and isinstance(st.value, n.Mma) and st.value.form == form and st.type:
                    shape = st.type.shape
                elif isinstance(st, n.MmaAsync) and st.form == form:
                    decl = tmem.get(an.ref_name(st.dest) or "")
                    shape = decl.type.shape if decl is not None else None
                if shape and isinstance(shape[-1], n.Name) and kernel.param(shape[-1].id) is not None:
                    names.add(shape[-1].id)
    return names.pop() if len(names) == 1 else None


def variants(rel: str, text: str) -> Iterator[Variant]:
    kernel = parse(text, rel)
    yield Variant(rel, "defaults", text)
    for p in kernel.params:
        for v in _domain(p):
            if v != p.default:
                yield Variant(rel, f"{p.name}={v}", text, ((p.name, v),))
    for d in kernel.dtype_vars:
        for choice in d.choices:
            yield Variant(rel, f"{d.name}={choice.value}", text, dtypes=((d.name, choice.value),))
    spec = ARCHS[kernel.target]
    for written in sorted({m.group(0) for m in _FORM.finditer(text)}):
        family, m, _n, k = _FORM.fullmatch(written).groups()  # type: ignore[union-attr]
        column = _column_param(kernel, written)
        for width in spec.mma_widths(MmaFamily(family), int(m)):
            form = f"{family}.m{m}n{width}k{k}"
            if form == written:
                continue
            edited = re.sub(rf"\b{re.escape(written)}\b", form, text)
            yield Variant(rel, form, edited)
            if column is not None:
                yield Variant(rel, f"{form} {column}={width}", edited, ((column, width),))


def all_variants() -> list[Variant]:
    out: list[Variant] = []
    for path in shipped_schedule_paths():
        text = path.read_text()
        rel = path.relative_to(ROOT.parent).as_posix()
        if parse(text, rel).target in TARGETS:
            out.extend(variants(rel, text))
    return out


def static_dims(kernel: n.Kernel) -> dict[str, int]:
    return {d.name: DEFAULT_STATIC_DIM for d in kernel.dims if d.static}


def judge(variant: Variant, *, compile_it: bool, cache_root: Path | None = None) -> Outcome:
    """Run the CUDA pipeline's passes (the checker with static dims bound, as a call specializes), lower, and
    (when `compile_it`) compile one variant."""
    kernel = variant.kernel()
    arch = kernel.target
    out = Outcome(variant.schedule, variant.label, arch, "accepted")
    try:
        kernel = run_passes(kernel, PASSES, LowerContext("cuda", arch, {}, variant.schedule, dims=static_dims(kernel)))
        errors: list[Diagnostic] = []
    except DiagnosticError as error:
        errors = [d for d in error.diagnostics if d.is_error]
    if errors:
        out.codes = sorted({d.code for d in errors})
        unlocated = [d for d in errors if d.span is None]
        out.verdict, out.why = ("failed", f"unlocated refusal {unlocated[0].code}: {unlocated[0].message}") \
            if unlocated else ("refused", ", ".join(out.codes))
        return out
    try:
        program = generate(kernel, arch, static_dims=static_dims(kernel), file=variant.schedule)
    except LoweringError as error:
        first = error.diagnostics[0]
        out.codes = sorted({d.code for d in error.diagnostics})
        out.verdict, out.why = "failed", f"checker accepted, codegen refused: {first.code} {first.message}"
        return out
    if not compile_it:
        return out
    smem = {c.kname: c.smem_bytes for c in program.launches}
    tmem = {c.kname: c.tmem_columns for c in program.launches}
    try:
        compile_cubin(program.source, arch, smem_dynamic_bytes=smem, tmem_columns=tmem, file=variant.schedule,
                      cache_root=cache_root)
    except CompileError as error:
        out.verdict, out.why = "failed", f"checker accepted, nvcc failed: {error.diagnostics[0].message[:300]}"
        return out
    out.verdict = "compiled"
    return out


def run(sample: int | None, seed: int, cache_root: Path | None = None) -> list[Outcome]:
    """Judge every variant; compile all accepted ones, or a seeded sample of `sample` of them."""
    found = all_variants()
    outcomes = [judge(v, compile_it=False) for v in found]
    accepted = [i for i, o in enumerate(outcomes) if o.verdict == "accepted"]
    chosen = accepted if sample is None else sorted(random.Random(seed).sample(accepted, min(sample, len(accepted))))
    for i in chosen:
        outcomes[i] = judge(found[i], compile_it=True, cache_root=cache_root)
    return outcomes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", type=int, default=None, help="compile only this many accepted variants")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        outcomes = run(args.sample, args.seed, Path(tmp))
    elapsed = time.perf_counter() - start
    counts = Counter(o.verdict for o in outcomes)
    by_schedule: dict[str, Counter[str]] = {}
    for o in outcomes:
        by_schedule.setdefault(f"{o.schedule} @ {o.arch}", Counter())[o.verdict] += 1
    print(f"{'schedule':<52} {'refused':>8} {'compiled':>9} {'failed':>7} {'unbuilt':>8}")
    for name, c in sorted(by_schedule.items()):
        print(f"{name:<52} {c['refused']:>8} {c['compiled']:>9} {c['failed']:>7} {c['accepted']:>8}")
    print(f"{'total':<52} {counts['refused']:>8} {counts['compiled']:>9} {counts['failed']:>7} "
          f"{counts['accepted']:>8}   ({len(outcomes)} variants, {elapsed:.0f} s)")
    for o in outcomes:
        if o.verdict == "failed":
            print(f"FAILED {o.schedule} [{o.label}] @ {o.arch}: {o.why}")
    if args.out is not None:
        args.out.write_text(json.dumps({"counts": dict(counts), "seconds": round(elapsed, 1),
                                        "sample": args.sample, "seed": args.seed,
                                        "outcomes": [asdict(o) for o in outcomes]}, indent=1))


if __name__ == "__main__":
    main()
