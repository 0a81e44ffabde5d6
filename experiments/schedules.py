"""Schedules at concrete parameters: specialize a `.cake` file, enumerate a param domain, load for running.

A specialized schedule is the same text with its params' defaults set (printed canonically by
`cake.ir.printer`), written under the cache so the verifier's worker and its verdict cache can name it by
path and hash its bytes like any other schedule.
"""

from __future__ import annotations

import hashlib
import itertools
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from cake.ir import nodes as n
from cake.ir.analysis import domain_values
from cake.ir.parser import parse
from cake.ir.printer import print_kernel
from cake.ir.transforms.bind_params import bind_params

from cake.diagnostics import DiagnosticError

SPECIALIZED_ENV = "CAKE_SPECIALIZED_DIR"
EXPERIMENTS = Path(__file__).resolve().parent


def shipped_schedule_paths(root: Path = EXPERIMENTS) -> list[Path]:
    """Every schedule the repository ships: `experiments/**/*.cake` (`root` stands in for experiments/).
    Evolve runs' candidate schedules are records, not shipped schedules: they live in results/, outside
    every package."""
    return sorted(root.rglob("*.cake"))


def specialized_dir() -> Path:
    override = os.environ.get(SPECIALIZED_ENV)
    base = Path(override).expanduser() if override else \
        Path(os.environ.get("XDG_CACHE_HOME", "~/.cache")).expanduser() / "cake" / "specialized"
    base.mkdir(parents=True, exist_ok=True)
    return base


def params_tag(params: Mapping[str, int]) -> str:
    return "_".join(f"{k}{v}" for k, v in sorted(params.items()))


def write_specialized(path: Path, params: Mapping[str, int], out_dir: Path | None = None) -> Path:
    """Write `path` specialized to `params`; the file name carries the params and a hash of the text."""
    kernel = bind_params(parse(path.read_text(), str(path)), params, file=path.name)
    text = print_kernel(kernel)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    target = (out_dir or specialized_dir()) / f"{kernel.name}__{params_tag(params)}__{digest}.cake"
    if not target.exists():
        target.write_text(text)
    return target


def load_schedule_file(path: Path, backend: str | None = None,
                       params: Mapping[str, int] | None = None) -> Callable[..., Any]:
    """The lowered, loaded kernel for a schedule file through the lowering's runtime: `backend` defaults to
    the runtime's ($CAKE_BACKEND, else triton), `params` to the file's defaults."""
    from cake.lowering.runtime import ScheduleError, load, lower, read_schedule

    kernel, text = read_schedule(path)
    try:
        lowered = lower(kernel, backend or _default_backend(), params=dict(params or {}), filename=str(path),
                        source_text=text)
    except DiagnosticError as error:
        raise ScheduleError(error.diagnostics, text) from None
    return load(lowered)


def _default_backend() -> str:
    from cake.lowering.runtime import BACKEND_ENV, DEFAULT_BACKEND

    return os.environ.get(BACKEND_ENV) or DEFAULT_BACKEND


def load_with_params(path: Path, params: Mapping[str, int], backend: str | None = None) -> Callable[..., Any]:
    return load_schedule_file(path, backend, params)


def param_grid(kernel: n.Kernel) -> Iterator[dict[str, int]]:
    """Every assignment of the kernel's params over their domains (ranges sampled as `domain_values` does)."""
    names = [p.name for p in kernel.params]
    for combo in itertools.product(*(domain_values(kernel, name) for name in names)):
        yield dict(zip(names, combo, strict=True))


def valid_assignments(kernel: n.Kernel, *, arch: str, backend: str, dims: Mapping[str, int]) -> Iterator[dict[str, int]]:
    """Param assignments the static checker accepts for `arch` and `backend` at `dims`."""
    from cake.ir.check import check, errors

    for params in param_grid(kernel):
        if not errors(check(bind_params(kernel, params), arch=arch, backend=backend, dims=dims)):
            yield params


BACKEND_ORDER: tuple[str, ...] = ("triton", "cuda")


def load_any_backend(path: Path, params: Mapping[str, int] | None = None) -> tuple[str, Callable[..., Any]]:
    """Load with the first backend (Triton, then CUDA) that can express the schedule. A backend that cannot
    refuses at lowering time with diagnostics; the last refusal is raised when none can."""
    last: DiagnosticError | None = None
    for backend in BACKEND_ORDER:
        try:
            return backend, load_schedule_file(path, backend, params)
        except DiagnosticError as refused:
            last = refused
    assert last is not None
    raise last
