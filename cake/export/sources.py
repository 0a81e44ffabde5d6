"""Where exported schedules come from: `.cake` files, or the best verified candidates of a run.

A run's candidates carry the verdict and replay tokens of their evaluation (the certificate copies them);
files carry none until `cake export --verify` or `cake certify` runs the battery.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cake.export.errors import ExportError


@dataclass(frozen=True, slots=True)
class Candidate:
    """One schedule to export, with what is known about its verification."""

    op: str
    text: str  # the schedule's IR text (params at their exported values)
    origin: str  # a file path, or `RUN_DIR#candidate-id`
    verdict: Mapping[str, Any] | None = None
    replay_tokens: tuple[str, ...] = ()
    seed: int | None = None
    device: str | None = None  # where the verdict was reached
    fitness: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    # The op's declared shapes (export buckets) whose dispatch tries this candidate first (a per-shape choice
    # table's routing); empty: it takes its place in candidate order everywhere.
    serves: tuple[str, ...] = ()


def from_files(paths: Sequence[Path]) -> list[Candidate]:
    from cake.lowering.runtime import read_schedule

    found = []
    for path in paths:
        if not path.is_file():
            raise ExportError(f"schedule file {path} does not exist")
        kernel, text = read_schedule(path)
        found.append(Candidate(op=kernel.op, text=text, origin=str(path)))
    return found


def from_choice_table(path: Path) -> list[Candidate]:
    """The configurations of an op's per-shape choice table (e.g. experiments/kmeans/update_buckets.json), each
    a candidate with its params as the schedule's defaults, served first at the declared shapes the table's
    rule sends to it."""
    from cake.experiments.workload import choice_configs
    from cake.ir.printer import print_kernel
    from cake.ir.transforms.bind_params import bind_params
    from cake.lowering.runtime import read_schedule

    if not path.is_file():
        raise ExportError(f"choice table {path} does not exist")
    op, configs = choice_configs(path)
    found = []
    for config in configs:
        kernel, _ = read_schedule(config.schedule)
        if kernel.op != op:
            raise ExportError(f"{path}: {config.schedule.name} implements {kernel.op}, not the table's op {op}")
        text = print_kernel(bind_params(kernel, dict(config.params), file=str(config.schedule)))
        shown = ",".join(f"{k}={v}" for k, v in config.params)
        found.append(Candidate(op=op, text=text, origin=f"{path}#{config.schedule.name}[{shown}]",
                               serves=config.serves))
    return found


def from_run(run_dir: Path, ops: Sequence[str], top: int) -> tuple[list[Candidate], str]:
    """The `top` passed candidates per op of a run, best fitness first, and the run's backend."""
    from cake.runs.store import DB_NAME, CandidateStatus, RunStore

    if not (run_dir / DB_NAME).exists():
        raise ExportError(f"{run_dir} is not a run directory (no run database)")
    with RunStore.open_read_only(run_dir) as store:  # a committed run stays byte-identical
        config = store.config
        passed = [c for c in store.candidates(status=CandidateStatus.PASSED) if c.evaluation is not None]
    run_op = str(config.get("op", ""))
    wanted = set(ops) if ops else {run_op}
    backend = str(config.get("eval", {}).get("backend", "triton"))
    device = str(config.get("eval", {}).get("device", "unknown"))
    seed = config.get("eval", {}).get("seed")
    chosen: list[Candidate] = []
    for op in sorted(wanted):
        if op != run_op:
            raise ExportError(f"run {run_dir} evolved `{run_op}`, not `{op}`")
        ranked = sorted(passed, key=lambda c: -(c.fitness if c.fitness is not None else float("-inf")))[:top]
        if not ranked:
            raise ExportError(f"run {run_dir} has no candidate of `{op}` that passed every gate")
        for c in ranked:
            ev = c.evaluation
            assert ev is not None
            chosen.append(Candidate(op=op, text=c.ir_text, origin=f"{run_dir}#{c.id}", verdict=ev.verdict,
                                    replay_tokens=tuple(ev.replay_tokens), seed=seed, device=device,
                                    fitness=c.fitness))
    return chosen, backend
