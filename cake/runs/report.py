"""Run reports: a run directory's data as one JSON-able dict, a markdown summary, and PNG plots.

`build(store)` gathers what a researcher needs from a run: the config, the candidates in proposal order
with their IR hashes, per-turn verdict mixes and rejections by diagnostic ID, the best-so-far series
against evaluations and against tokens, predicted vs measured times, and the best kernel's lineage.
`write(report, out_dir)` renders it (matplotlib's Agg backend: no display needed). A fitness computed by
the cost model (`fitness_kind=model`) is labelled as a prediction everywhere it appears.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cake.runs.rulestore import learned_rule_savings
from cake.runs.store import CandidateRow, CandidateStatus, RunStore

STATUS_ORDER = tuple(s.value for s in CandidateStatus)
PLOTS = ("best_vs_evaluations.png", "best_vs_tokens.png", "verdicts_per_turn.png", "predicted_vs_measured.png",
         "lineage.png")


def lineage(rows: Mapping[int, CandidateRow], leaf: int) -> list[CandidateRow]:
    """The best kernel's ancestry through first parents, seed first."""
    chain: list[CandidateRow] = []
    seen: set[int] = set()
    current: int | None = leaf
    while current is not None and current in rows and current not in seen:
        seen.add(current)
        row = rows[current]
        chain.append(row)
        current = row.parents[0] if row.parents else None
    return chain[::-1]


def _speedups(row: CandidateRow) -> dict[str, float]:
    """Measured speedup over each baseline timed with a verified candidate: at one shape its `<name>_ms` over
    `candidate_ms`; at several (`<name>_ms@<shape>` beside the first shape's `<name>_ms`) the geomean over the
    shapes where both have a time, as the run's multi-shape fitness is."""
    from cake.stats import geomean

    ev = row.evaluation
    if ev is None or row.status is not CandidateStatus.PASSED or not ev.measured_ms:
        return {}
    by_shape: dict[str, dict[str, float]] = {}  # contestant -> shape ("" the first) -> median
    for key, value in ev.timings.items():
        head, _, shape = key.partition("@")
        if head.endswith("_ms") and value:
            by_shape.setdefault(head.removesuffix("_ms"), {})[shape] = value
    mine = by_shape.pop("candidate", {})
    found = {}
    for name, times in sorted(by_shape.items()):
        ratios = [times[shape] / mine[shape] for shape in times if shape in mine]
        if ratios:
            found[name] = geomean(ratios)
    return found


def _fitness_kind(rows: Sequence[CandidateRow]) -> str | None:
    kinds = {r.evaluation.fitness_kind.value for r in rows if r.evaluation and r.evaluation.fitness_kind}
    return kinds.pop() if len(kinds) == 1 else ("mixed" if kinds else None)


def samples_interval(path: Path, *, seed: int = 0, resamples: int = 2000) -> dict[str, Any] | None:
    """The 95% bootstrap interval of the candidate's speedup over the best of its baselines inside one bench
    process (the bench worker's kept run or `cake bench --json`: every sample, rep-paired), the geomean over
    the shapes it timed as the fitness is; None when the file, the samples or a baseline is missing. A baseline
    with fewer reps than the candidate was retired by the timing protocol (`TimingConfig.retire_ratio`: far slower
    than the fastest baseline, so never the one a speedup is taken against) and is left out at that shape; the
    interval names what it left out (`retired`)."""
    from cake.stats import best_over_the_rest, geomean_bootstrap, process_table

    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    tables, names, shapes, retired = [], None, [], []
    for shape in data.get("shapes", ()):
        measurements = {m["name"]: m for m in shape.get("measurements", ())}
        candidate = next((m for m in measurements.values() if m.get("candidate")), None)
        speedup = (candidate or {}).get("extra", {}).get("speedup") or {}
        against = [str(n) for n in speedup.get("against", ())]
        reps = (candidate or {}).get("times_ms") or []
        columns = [measurements.get(n, {}).get("times_ms") for n in against]
        if candidate is None or not reps or not against or names not in (None, against) or not all(columns):
            return None
        kept = [list(c) for c in columns if c and len(c) == len(reps)]
        if not kept or any(c and len(c) > len(reps) for c in columns):
            return None
        names = against
        retired += [f"{n}@{shape.get('shape', {}).get('name')}" for n, c in zip(against, columns, strict=True)
                    if c and len(c) < len(reps)]
        tables.append(process_table([list(reps), *kept]))
        shapes.append(shape.get("shape", {}).get("name"))
    if not tables or names is None:
        return None
    # column 0 is the candidate, the rest the baselines still in the rotation at that shape (a width per shape)
    interval = geomean_bootstrap(tables, best_over_the_rest(), seed=seed, resamples=resamples)
    return {**interval.to_json(), "against": names, "shapes": shapes, "retired": retired}


def build(store: RunStore) -> dict[str, Any]:
    rows = store.candidates()
    by_id = {r.id: r for r in rows}
    turns = store.turns()
    tokens_by_turn: dict[int, int] = {}
    running = 0
    for t in turns:
        running += t.tokens
        tokens_by_turn[t.turn] = running
    evaluated = [r for r in rows if r.evaluation is not None]
    best_series: list[dict[str, Any]] = []
    best: CandidateRow | None = None
    parity_at: int | None = None
    parity_by_baseline: dict[str, int | None] = {}
    for i, row in enumerate(evaluated, start=1):
        fit = row.fitness
        for baseline, speedup in _speedups(row).items():
            parity_by_baseline.setdefault(baseline, None)
            if parity_by_baseline[baseline] is None and speedup >= 1.0:
                parity_by_baseline[baseline] = i
        if row.status is CandidateStatus.PASSED and fit is not None and (best is None or fit > (best.fitness or 0.0)):
            best = row
        if parity_at is None and best is not None and (best.fitness or 0.0) >= 1.0:
            parity_at = i
        best_series.append({"evaluations": i, "tokens": tokens_by_turn.get(row.turn, 0), "candidate": row.id,
                            "fitness": fit, "best_fitness": best.fitness if best else None})
    verdicts_per_turn = []
    rejections: dict[str, int] = {}
    for t in turns:
        counts = {s: 0 for s in STATUS_ORDER}
        for row in rows:
            if row.turn == t.turn:
                counts[row.status.value] += 1
        verdicts_per_turn.append({"turn": t.turn, "counts": counts, "rejections": dict(t.rejections),
                                  "tokens": t.tokens, "notes": list(t.agent_notes)})
        for code, count in t.rejections.items():
            rejections[code] = rejections.get(code, 0) + count
    retimes = store.retimes()
    if retimes:  # a measured run reports its best re-timed in a fresh process (cake.agents.loop)
        confirmed = [r for r in evaluated if r.id in retimes and retimes[r.id].fitness is not None]
        best = max(confirmed, key=lambda r: (retimes[r.id].fitness or 0.0, -r.id)) if confirmed else None
    retime = retimes.get(best.id) if best is not None else None
    retimed = None if retime is None else {
        **retime.to_json(), "interval": samples_interval(store.root / "candidates" / retime.samples)
        if retime.samples else None}
    predicted_vs_measured = [
        {"candidate": r.id, "predicted_ms": r.predicted_ms, "measured_ms": r.evaluation.measured_ms}
        for r in evaluated if r.evaluation and r.evaluation.measured_ms is not None and r.predicted_ms is not None]
    config = store.config
    return {
        "run": str(store.root.resolve()),
        "config": config,
        "fitness_kind": _fitness_kind(evaluated),
        "summary": {
            "turns": len(turns), "proposed": len(rows), "evaluations": len(evaluated),
            "passed": sum(r.status is CandidateStatus.PASSED for r in rows),
            "internal_errors": sum(r.status is CandidateStatus.INTERNAL for r in rows),
            "tokens": store.total_tokens(), "rejections": dict(sorted(rejections.items())),
            "best": None if best is None else {
                "id": best.id, "ir_hash": best.ir_hash, "fitness": best.fitness, "mutation": best.mutation,
                "measured_ms": best.evaluation.measured_ms if best.evaluation else None,
                "baseline_ms": best.evaluation.baseline_ms if best.evaluation else None,
                "predicted_ms": best.predicted_ms, "path": f"candidates/{best.ir_hash}.cake",
                "speedup_by_baseline": _speedups(best), "retimed": retimed},
            "evaluations_to_parity": parity_at,
            "evaluations_to_parity_by_baseline": parity_by_baseline,
            "evaluations_to_best": next((s["evaluations"] for s in best_series if best and s["candidate"] == best.id),
                                        None),
            "stop": next((d for _, k, d in reversed(store.events()) if k == "stop"), None),
        },
        "best_series": best_series,
        "verdicts_per_turn": verdicts_per_turn,
        "predicted_vs_measured": predicted_vs_measured,
        "learned_rules": learned_rule_savings(store),  # per turn: rejected by learned rules, evaluations saved
        "lineage": [{"id": r.id, "turn": r.turn, "ir_hash": r.ir_hash, "mutation": r.mutation, "fitness": r.fitness,
                     "status": r.status.value} for r in (lineage(by_id, best.id) if best else [])],
        "candidates": [r.to_json() for r in rows],
    }


# ------------------------------------------------------------------------------------------------ rendering


def _fitness_label(kind: str | None) -> str:
    if kind == "model":
        return "predicted speedup (cost model, not a timing)"
    return "measured speedup over the best baseline"


def write(report: Mapping[str, Any], out_dir: Path) -> list[Path]:
    """Write report.md and the PNG plots into `out_dir`; returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = _plots(report, out_dir)
    md = out_dir / "report.md"
    md.write_text(markdown(report))
    return [md, *paths]


def markdown(report: Mapping[str, Any]) -> str:
    s = report["summary"]
    cfg = report["config"]
    kind = report["fitness_kind"]
    lines = [f"# cake evolve run `{Path(report['run']).name}`", ""]
    lines += [f"- workload `{cfg.get('workload')}`, op `{cfg.get('op')}`, arch `{cfg.get('arch')}`, agent "
              f"`{cfg.get('agent')}`, device `{cfg.get('eval', {}).get('device')}`, seed {cfg.get('loop', {}).get('seed')}",
              f"- {s['turns']} turns, {s['proposed']} proposals, {s['evaluations']} evaluations, {s['passed']} passed, "
              f"{s['tokens']} tokens; stopped: {s['stop']}",
              f"- fitness: **{_fitness_label(kind)}** (fitness_kind={kind})"]
    if kind == "model":
        lines.append("- This run had no GPU: every speedup below is the cost model's prediction, not a measurement.")
    best = s["best"]
    if best:
        timing = "" if best["measured_ms"] is None else f", measured {best['measured_ms']:.4f} ms" + (
            f" vs {best['baseline_ms']:.4f} ms" if best["baseline_ms"] is not None
            else " at the first fitness shape (the fitness is the geomean over its shapes)")
        lines.append(f"- best: #{best['id']} `{best['ir_hash']}` speedup **{best['fitness']:.3f}x**{timing} "
                     f"({best['path']}); reached after {s['evaluations_to_best']} evaluations; parity after "
                     f"{s['evaluations_to_parity']}")
        retimed = best.get("retimed")
        if retimed is not None:
            figure = "undefined" if retimed["fitness"] is None else f"**{retimed['fitness']:.3f}x**"
            iv = retimed.get("interval")
            spread = "" if not iv else (f" [{iv['low']:.3f}, {iv['high']:.3f}] (95%, bootstrap over that process's reps"
                                        + (f" at {len(iv['shapes'])} shapes)" if len(iv["shapes"]) > 1 else ")"))
            lines.append(f"  - re-timed in a fresh process before being reported: {figure}{spread}"
                         + (f"; {retimed['error']}" if retimed.get("error") else ""))
        for name, speedup in best["speedup_by_baseline"].items():
            first = s["evaluations_to_parity_by_baseline"].get(name)
            lines.append(f"  - over `{name}`: {speedup:.3f}x (first verified candidate at parity: evaluation {first})")
    else:
        lines.append("- no candidate passed verification")
    if s.get("internal_errors"):
        lines.append(f"- **{s['internal_errors']} internal errors** (`error: internal`): a check, pass or generator "
                     "crashed on these candidates, a bug in CAKE, not a rejection; their stored diagnostic says what "
                     "failed")
    lines += ["", "## Rejections by diagnostic ID", ""]
    lines += [f"- `{code}`: {count}" for code, count in s["rejections"].items()] or ["- none"]
    lines += ["", "## Learned rules", "", "| turn | rejected by learned rules | evaluations saved | GPU s saved (est.) |",
              "|---|---|---|---|"]
    lines += [f"| {t['turn']} | {t['rejected_by_learned']} | {t['evaluations_saved']} | {t['gpu_seconds_saved']} |"
              for t in report.get("learned_rules", ())]
    lines += ["", "Evaluations saved: candidates only a learned rule stopped (an upper bound: each would have run "
              "only if ranked into its turn's top m); GPU seconds from the evaluations each rule was learned from."]
    lines += ["", "## Verdicts per turn", "", "| turn | " + " | ".join(STATUS_ORDER) + " | tokens |",
              "|" + "---|" * (len(STATUS_ORDER) + 2)]
    for t in report["verdicts_per_turn"]:
        lines.append(f"| {t['turn']} | " + " | ".join(str(t["counts"][k]) for k in STATUS_ORDER) + f" | {t['tokens']} |")
    lines += ["", "## Lineage of the best kernel", ""]
    for step in report["lineage"]:
        fit = "-" if step["fitness"] is None else f"{step['fitness']:.3f}x"
        lines.append(f"1. #{step['id']} (turn {step['turn']}, {step['status']}, {fit}): {step['mutation']}")
    if not report["lineage"]:
        lines.append("- none")
    lines += ["", "## Plots", ""] + [f"![{p}]({p})" for p in PLOTS] + [""]
    return "\n".join(lines)


def _plots(report: Mapping[str, Any], out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    label = _fitness_label(report["fitness_kind"])
    series = report["best_series"]
    written = []

    def save(fig: Any, name: str) -> None:
        path = out_dir / name
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    for x_key, name, xlabel in (("evaluations", PLOTS[0], "evaluations"), ("tokens", PLOTS[1], "tokens")):
        fig, ax = plt.subplots(figsize=(6, 4))
        pts = [(p[x_key], p["best_fitness"]) for p in series if p["best_fitness"] is not None]
        if pts:
            ax.step([p[0] for p in pts], [p[1] for p in pts], where="post", label="best so far")
            raw = [(p[x_key], p["fitness"]) for p in series if p["fitness"] is not None]
            ax.scatter([p[0] for p in raw], [p[1] for p in raw], s=12, alpha=0.5, label="candidates")
            ax.axhline(1.0, color="grey", lw=0.8, ls="--")
            ax.legend()
        else:
            ax.text(0.5, 0.5, "no verified candidate", ha="center", va="center", transform=ax.transAxes)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(label, fontsize=8)
        save(fig, name)

    fig, ax = plt.subplots(figsize=(7, 4))
    turns = [t["turn"] for t in report["verdicts_per_turn"]]
    bottom = [0] * len(turns)
    for status in STATUS_ORDER:
        values = [t["counts"][status] for t in report["verdicts_per_turn"]]
        if any(values):
            ax.bar(turns, values, bottom=bottom, label=status)
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_xlabel("turn")
    ax.set_ylabel("candidates")
    ax.legend(fontsize=7)
    save(fig, PLOTS[2])

    fig, ax = plt.subplots(figsize=(5, 5))
    pairs = report["predicted_vs_measured"]
    if pairs:
        ax.scatter([p["predicted_ms"] for p in pairs], [p["measured_ms"] for p in pairs], s=14)
        ax.set_xlabel("predicted ms (cost model)")
        ax.set_ylabel("measured ms")
    else:
        ax.text(0.5, 0.5, "no measured times in this run\n(no GPU: fitness_kind=model)", ha="center", va="center",
                transform=ax.transAxes)
    save(fig, PLOTS[3])

    fig, ax = plt.subplots(figsize=(7, 4))
    chain = report["lineage"]
    if chain:
        xs = list(range(len(chain)))
        ys = [c["fitness"] if c["fitness"] is not None else 0.0 for c in chain]
        ax.plot(xs, ys, marker="o")
        for x, y, c in zip(xs, ys, chain, strict=True):
            ax.annotate(f"#{c['id']} {c['mutation'].split(':', 1)[0]}", (x, y), fontsize=7, rotation=20,
                        textcoords="offset points", xytext=(3, 5))
        ax.set_xticks(xs)
        ax.set_xlabel("generation (seed first)")
        ax.set_ylabel(label, fontsize=8)
    else:
        ax.text(0.5, 0.5, "no verified candidate", ha="center", va="center", transform=ax.transAxes)
    save(fig, PLOTS[4])
    return written
