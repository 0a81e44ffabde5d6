"""Repetition in separate processes: run a measuring command P times, each in a fresh process, and turn what
the processes measured into headline figures (median over processes, bootstrap interval: `cake.stats`).

A process writes one JSON payload (`process_payload`): per op and shape, every sample of every contestant it
timed (rep-paired) and why each contestant without a time has none. `aggregate` reads the payloads back and
computes, per shape, each contestant's time and each candidate's speedup over the best of the named
baselines, as `Speedup`s that are undefined (with the reason) when a baseline is missing in any process or
fewer than `MIN_PROCESSES` processes finished. A process that crashed or timed out is listed, never
silently dropped. Nothing here times anything; it is testable on a CPU with payloads written by hand.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cake.stats import (
    DEFAULT_RESAMPLES,
    MIN_PROCESSES,
    ProcessSamples,
    headline_speedup,
    headline_time,
)


@dataclass(frozen=True, slots=True)
class ProcessOutcome:
    index: int
    payload: Path | None  # the JSON the process wrote, or None
    returncode: int | str
    seconds: float
    tail: str  # the last lines of its output

    def to_json(self) -> dict[str, object]:
        return {"index": self.index, "payload": None if self.payload is None else str(self.payload),
                "returncode": self.returncode, "seconds": self.seconds, "tail": self.tail}


def run_processes(command_for: Callable[[int, Path], Sequence[str]], count: int, out_dir: Path,
                  timeout_s: float, env: Mapping[str, str] | None = None) -> list[ProcessOutcome]:
    """Run `command_for(i, payload_path)` for i in 0..count-1, one after another (a GPU is measured by one
    process at a time), each in its own session so a timeout kills its whole process group."""
    out_dir.mkdir(parents=True, exist_ok=True)
    outcomes = []
    for index in range(count):
        payload = out_dir / f"process_{index}.json"
        payload.unlink(missing_ok=True)
        log = out_dir / f"process_{index}.log"
        started = time.monotonic()
        with log.open("w") as sink:
            proc = subprocess.Popen(list(command_for(index, payload)), stdout=sink, stderr=subprocess.STDOUT,
                                    env=dict(env) if env is not None else None, start_new_session=True)
            try:
                returncode: int | str = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                returncode = f"timed out after {timeout_s:g} s"
        tail = "\n".join(log.read_text(errors="replace").strip().splitlines()[-12:])
        outcomes.append(ProcessOutcome(index, payload if payload.is_file() else None, returncode,
                                       time.monotonic() - started, tail))
    return outcomes


def process_payload(index: int, seed: int, meta: Mapping[str, Any],
                    measured: Mapping[str, Mapping[str, ProcessSamples]],
                    notes: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None) -> dict[str, Any]:
    """What one process writes: `measured[op][shape]` samples, plus free-form `notes[op][shape]` (which config a
    tuned baseline used, the verification of each candidate)."""
    notes = notes or {}
    return {"process": index, "seed": seed, **meta,
            "ops": {op: {shape: {**s.to_json(), "notes": dict(notes.get(op, {}).get(shape, {}))}
                         for shape, s in shapes.items()} for op, shapes in measured.items()}}


def _samples(entry: Mapping[str, Any]) -> ProcessSamples:
    return ProcessSamples({k: tuple(float(t) for t in v) for k, v in entry.get("times_ms", {}).items()},
                          {k: str(v) for k, v in entry.get("problems", {}).items()})


def aggregate(payloads: Sequence[Mapping[str, Any]], candidates: Mapping[str, Sequence[str]],
              against: Mapping[str, Sequence[str]], *, seed: int, resamples: int = DEFAULT_RESAMPLES,
              min_processes: int = MIN_PROCESSES) -> dict[str, Any]:
    """Headlines per op and shape: every contestant's time (median over processes, interval) and each candidate's
    speedup over the best of `against[op]`. A shape missing from a payload counts as that process lacking it."""
    out: dict[str, Any] = {}
    for op, names in candidates.items():
        shapes: list[str] = []
        for p in payloads:
            shapes += [s for s in p.get("ops", {}).get(op, {}) if s not in shapes]
        rows = {}
        for shape in shapes:
            entries = [p.get("ops", {}).get(op, {}).get(shape) for p in payloads]
            contestants = sorted({n for e in entries if e for n in e.get("times_ms", {})} | set(names) | set(against[op]))
            runs = [_samples(e) if e is not None else
                    ProcessSamples({}, {n: f"process {p.get('process')} did not reach {shape}" for n in contestants})
                    for p, e in zip(payloads, entries, strict=True)]
            times = {}
            for n in contestants:
                interval = headline_time(runs, n, seed=seed, resamples=resamples)
                times[n] = None if interval is None else interval.to_json()
            speedups = {n: headline_speedup(runs, n, against[op], seed=seed, resamples=resamples,
                                            min_processes=min_processes).to_json() for n in names}
            rows[shape] = {"processes": len(runs), "time_ms": times, "speedup": speedups,
                           "per_process_median_ms": [{n: _median(r.times.get(n)) for n in contestants} for r in runs],
                           "problems": [dict(r.problems) for r in runs],
                           "notes": [p.get("ops", {}).get(op, {}).get(shape, {}).get("notes", {}) for p in payloads]}
        out[op] = rows
    return out


def _median(values: Sequence[float] | None) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def load_payloads(outcomes: Sequence[ProcessOutcome]) -> list[dict[str, Any]]:
    return [json.loads(o.payload.read_text()) for o in outcomes if o.payload is not None]


def markdown(headlines: Mapping[str, Any], candidates: Mapping[str, Sequence[str]],
             against: Mapping[str, Sequence[str]]) -> str:
    """A RESULTS.md-ready table per op: each candidate's time and speedup with their 95% intervals."""
    lines = []
    for op, rows in headlines.items():
        lines += [f"### {op}: speedup over the best of {', '.join(against[op])}", "",
                  "| shape | kernel | ms (95% interval) | speedup (95% interval) | best baseline | processes |",
                  "|---|---|---|---|---|---|"]
        for shape, row in rows.items():
            for name in candidates[op]:
                t = row["time_ms"].get(name)
                s = row["speedup"][name]
                ms = "-" if t is None else f"{t['point']:.3f} [{t['low']:.3f}, {t['high']:.3f}]"
                if s["value"] is None:
                    sp = f"undefined: {s['undefined']}"
                else:
                    iv = s["interval"]
                    sp = f"**{s['value']:.3f}x** [{iv['low']:.3f}, {iv['high']:.3f}]"
                lines.append(f"| {shape} | {name} | {ms} | {sp} | {s['best_baseline'] or '-'} | {s['processes']} |")
            for name in against[op]:
                t = row["time_ms"].get(name)
                ms = "missing" if t is None else f"{t['point']:.3f} [{t['low']:.3f}, {t['high']:.3f}]"
                lines.append(f"| {shape} | baseline {name} | {ms} | | | |")
        lines.append("")
    return "\n".join(lines)
