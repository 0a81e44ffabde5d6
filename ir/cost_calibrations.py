"""Calibration factors per (backend, device, toolchain): one committed data file per key, and the lookup.

A calibration multiplies the cost model's term times (`cake.ir.cost_calibration.Factors`). The same schedule
lowered by the Triton backend and by the CUDA backend runs different code, so a calibration fitted on one
backend's timings says nothing about the other's: each key has its own file,
`ir/data/calibrations/<backend>__<device>__<toolchain>.json`, written by `scripts/fit_cost_model.py` with its
provenance (which runs it was fitted on, their date and toolchain, its held-out figures, and what it kept out
of the fit).

`calibration_for` never substitutes another backend's or another toolchain's factors: a key with no file is
an explicit *uncalibrated* state (`CalibrationState`) that every prediction carries, with the reason.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cake.ir.cost_calibration import Factors, current_codegen
from cake.ir.cost_correction import Correction, CorrectionError

CALIBRATION_DIR = Path(__file__).resolve().parent / "data" / "calibrations"
BACKENDS: tuple[str, ...] = ("triton", "cuda")
_SAFE = re.compile(r"[^A-Za-z0-9.+-]")


def toolchain_key(versions: Mapping[str, str]) -> str:
    """A backend's toolchain versions (its `toolchain()` dict, compiler first) as calibrations key them:
    {"triton": "3.6.0", "torch": "2.11.0+cu130"} -> "triton-3.6.0+torch-2.11.0" (local suffixes dropped)."""
    if not versions:
        raise ValueError("a toolchain key needs at least one versioned tool")
    return "+".join(f"{tool}-{str(version).split('+')[0]}" for tool, version in versions.items())


# The clock `cake bench` and every evolve evaluation time with: CUDA events around the eager host call.
BENCH_CLOCK = "events"
# The clock that times device work alone (events around a CUDA-graph replay): what the model itself prices. A caller
# that names no clock is priced with a fit of it when one is on file.
KERNEL_CLOCK = "graph"


def timed_toolchain(toolchain: str, codegen: str, clock: str) -> str:
    """The toolchain part of a calibration key for timings of generated code: the compilers' `toolchain_key`,
    the backend's codegen version (one IR lowers to different code across versions, so timings of version 1
    say little about version 4) and the clock that timed it ("events": device events around the host call;
    "graph": around a CUDA-graph replay, kernel-only). E.g. "nvcc-13.0.88+torch-2.11.0+codegen-4+graph"."""
    for part, value in (("codegen", codegen), ("clock", clock)):
        if not value or _SAFE.search(value):
            raise ValueError(f"a calibration key's {part} must be a plain token (letters, digits, . + -), got {value!r}")
    return f"{toolchain}+codegen-{codegen}+{clock}"


@dataclass(frozen=True, slots=True, order=True)
class CalibrationKey:
    backend: str  # "triton" | "cuda": the backend whose generated code was timed
    device: str  # a `cake.arch` device name, e.g. "H200"
    toolchain: str  # `toolchain_key` of the backend's toolchain, e.g. "nvcc-13.0.88+torch-2.11.0"; fits of timed
    # runs key `timed_toolchain` (codegen version and clock appended)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"unknown backend `{self.backend}` in a calibration key; known: {', '.join(BACKENDS)}")

    @property
    def file_name(self) -> str:
        return "__".join(_SAFE.sub("_", part) for part in (self.backend, self.device, self.toolchain)) + ".json"

    def __str__(self) -> str:
        return f"{self.backend}/{self.device}/{self.toolchain}"


@dataclass(frozen=True, slots=True)
class Calibration:
    """Fitted factors for one key, with what they were fitted on."""

    key: CalibrationKey
    factors: Factors
    fitted_on: int  # timed schedules in the fit
    date: str
    # runs (paths), their toolchains, held-out figures, excluded candidates, the tool that wrote it
    provenance: Mapping[str, Any] = field(default_factory=dict)
    at_bound: tuple[str, ...] = ()  # factors the fit left at a bound (their term's physics is suspect)
    # the learned correction over the factored analytic time (`cake.ir.cost_correction`); None: factors only
    correction: Correction | None = None

    def to_json(self) -> dict[str, Any]:
        out = {"backend": self.key.backend, "device": self.key.device, "toolchain": self.key.toolchain,
               "factors": self.factors.to_json(), "fitted_on": self.fitted_on, "date": self.date,
               "at_bound": list(self.at_bound), "provenance": dict(self.provenance)}
        if self.correction is not None:
            out["correction"] = self.correction.to_json()
        return out

    @staticmethod
    def from_json(data: Mapping[str, Any], where: str = "<calibration>") -> Calibration:
        try:
            key = CalibrationKey(str(data["backend"]), str(data["device"]), str(data["toolchain"]))
            factors = Factors(**{str(k): float(v) for k, v in dict(data["factors"]).items()})
            correction = Correction.from_json(data["correction"]) if "correction" in data else None
            return Calibration(key, factors, int(data["fitted_on"]), str(data["date"]),
                               dict(data.get("provenance", {})), tuple(data.get("at_bound", ())), correction)
        except CorrectionError as error:
            raise CalibrationFileError(f"{where}: {error}") from None
        except (KeyError, TypeError, ValueError) as error:
            raise CalibrationFileError(f"{where}: not a calibration ({type(error).__name__}: {error}); "
                                       f"rewrite it with scripts/fit_cost_model.py") from None


class CalibrationFileError(ValueError):
    """A committed calibration file that does not hold a calibration (a broken data file, not a state)."""


@dataclass(frozen=True, slots=True)
class CalibrationState:
    """What calibrated a prediction: a stored calibration, factors the caller passed, or nothing (priors),
    always with the reason. `label` is what tables print."""

    kind: str  # "calibrated" | "explicit" | "uncalibrated"
    calibration: Calibration | None
    reason: str

    @property
    def calibrated(self) -> bool:
        return self.kind == "calibrated"

    @property
    def factors(self) -> Factors:
        return self.calibration.factors if self.calibration is not None else Factors()

    @property
    def correction(self) -> Correction | None:
        return self.calibration.correction if self.calibration is not None else None

    @property
    def label(self) -> str:
        if self.calibration is not None:
            return f"calibrated {self.calibration.key}" + (f" ({self.reason})" if self.reason else "")
        return f"{self.kind}: {self.reason}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "key": str(self.calibration.key) if self.calibration else None,
                "reason": self.reason}

    @staticmethod
    def explicit() -> CalibrationState:
        return CalibrationState("explicit", None, "factors given by the caller")

    @staticmethod
    def uncalibrated(reason: str) -> CalibrationState:
        return CalibrationState("uncalibrated", None, reason)


def read_calibration(path: Path) -> Calibration:
    """One stored calibration file; CalibrationFileError when this model cannot read it (e.g. a correction over
    features it no longer has)."""
    return Calibration.from_json(json.loads(path.read_text()), str(path))


def calibrations(directory: Path = CALIBRATION_DIR) -> tuple[Calibration, ...]:
    if not directory.is_dir():
        return ()
    out = []
    for path in sorted(directory.glob("*.json")):
        cal = read_calibration(path)
        if cal.key.file_name != path.name:
            raise CalibrationFileError(f"{path}: holds the calibration for {cal.key}, whose file is "
                                       f"{cal.key.file_name}; rename it or rewrite it with scripts/fit_cost_model.py")
        out.append(cal)
    return tuple(out)


def calibration_for(backend: str | None, device: str, toolchain: str | None = None,
                    directory: Path = CALIBRATION_DIR, clock: str | None = None) -> CalibrationState:
    """The calibration for (backend, device, toolchain). With `toolchain` None (a caller that does not know
    which toolchain will run the schedule, e.g. a CPU-only search predicting for a GPU), the newest
    calibration for (backend, device) of the backend's current codegen version (`current_codegen`; of any
    version when none is on file) — of those, one fitted to timings of `clock` when there is one (an evolve run
    ranks for its bench, which times with `BENCH_CLOCK`; no clock named: `KERNEL_CLOCK`) — and the label says so.
    Anything else without an exact file is uncalibrated, with the reason: never another backend's or toolchain's
    factors."""
    if backend is None:
        return CalibrationState.uncalibrated("no backend named (calibrations are per backend)")
    mine = [c for c in calibrations(directory) if (c.key.backend, c.key.device) == (backend, device)]
    if toolchain is None:
        if not mine:
            return CalibrationState.uncalibrated(f"no calibration for {backend} on {device}")
        # Fits of older generated code stay on file (their runs are evidence for the report), but never price
        # today's code while a fit of the current codegen exists.
        current = current_codegen(backend)
        of_current = [c for c in mine if current is not None and f"+codegen-{current}+" in c.key.toolchain]
        candidates = of_current or mine
        wanted = clock or KERNEL_CLOCK
        of_clock = [c for c in candidates if c.key.toolchain.endswith(f"+{wanted}")]
        newest = max(of_clock or candidates, key=lambda c: (c.date, c.key.toolchain))
        which = f"codegen {current}" if of_current else f"{backend}/{device}"
        timed = f", timed by {wanted}" if of_clock else ""
        return CalibrationState("calibrated", newest, f"toolchain not given: the newest for {which}{timed}")
    exact = [c for c in mine if c.key.toolchain == toolchain]
    if exact:
        return CalibrationState("calibrated", exact[0], "")
    known = ", ".join(c.key.toolchain for c in mine) or "none"
    return CalibrationState.uncalibrated(f"no calibration for {backend}/{device}/{toolchain} "
                                         f"(calibrated toolchains for {backend}/{device}: {known})")


def store_calibration(calibration: Calibration, directory: Path = CALIBRATION_DIR) -> Path:
    """Write (or replace) the file of the calibration's key."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / calibration.key.file_name
    path.write_text(json.dumps(calibration.to_json(), indent=2, sort_keys=False) + "\n")
    return path
