"""The op registry: which contracts exist. Workloads contribute them; the verifier only looks them up.

A workload registers a `WorkloadContracts` — its name, its contracts and, per op, its correct `Controls` —
through the Python entry-point group `cake.workloads` (CAKE's own workloads included, in pyproject.toml):

    [project.entry-points."cake.workloads"]
    my_ops = "my_package.workload:CONTRACTS"

The entry point names a `WorkloadContracts`, or any object whose `contracts` attribute is one (CAKE's
evolvable `Workload` is such an object). Entry points load on the first lookup, once per process; a
verifier worker subprocess loads them again, so an installed workload is known there too. `register()`
adds one directly (a notebook, a test). An op name is unique across workloads.
"""

from __future__ import annotations

import importlib.metadata
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from cake.verifier.contracts import Contract
from cake.verifier.controls import Controls

ENTRY_POINT_GROUP = "cake.workloads"


@dataclass(frozen=True, slots=True)
class WorkloadContracts:
    """What one workload contributes to the verifier: contracts, and correct controls by op name."""

    name: str
    contracts: tuple[Contract, ...]
    controls: Mapping[str, Controls] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = [c.name for c in self.contracts]
        stray = sorted(set(self.controls) - set(names))
        if stray or len(set(names)) != len(names):
            raise ValueError(f"workload {self.name!r}: controls for unknown ops {stray} or an op named twice "
                             f"in {names}; give each contract a unique name and controls only for those")


class UnknownOpError(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


class WorkloadRegistrationError(ValueError):
    """A workload that cannot be registered: a broken entry point, a wrong object, a clashing op name."""


@dataclass(frozen=True, slots=True)
class _Entry:
    contract: Contract
    controls: Controls | None
    workload: str


class _Registry:
    def __init__(self) -> None:
        self._ops: dict[str, _Entry] = {}
        self._loaded = False
        # Evaluation threads (`cake evolve`'s local executor) may ask at once: the first loads the entry points
        # while the others wait, instead of seeing `_loaded` already set and an empty table. Re-entrant, since a
        # workload module may look contracts up while it loads (on the loading thread).
        self._lock = threading.RLock()

    def register(self, workload: WorkloadContracts) -> None:
        clashes = [f"`{c.name}` (already from workload {self._ops[c.name].workload!r})"
                   for c in workload.contracts if c.name in self._ops and self._ops[c.name].workload != workload.name]
        if clashes:
            raise WorkloadRegistrationError(
                f"workload {workload.name!r} registers {', '.join(clashes)}; op names are global: rename the op")
        for name in [n for n, e in self._ops.items() if e.workload == workload.name]:
            del self._ops[name]  # re-registering a workload replaces its ops (a reloaded notebook cell)
        for contract in workload.contracts:
            self._ops[contract.name] = _Entry(contract, workload.controls.get(contract.name), workload.name)

    def ops(self) -> dict[str, _Entry]:
        with self._lock:
            if not self._loaded:
                self._loaded = True  # set first: a workload module may look contracts up while it loads
                for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
                    self.register(_resolve(entry_point))
            return self._ops


def _resolve(entry_point: importlib.metadata.EntryPoint) -> WorkloadContracts:
    where = f"entry point `{entry_point.name} = {entry_point.value}` (group {ENTRY_POINT_GROUP})"
    try:
        loaded = entry_point.load()
    except (ImportError, AttributeError) as err:
        raise WorkloadRegistrationError(f"{where} does not load: {err}; fix the module path or reinstall the "
                                        "package that declares it (`pip install -e .`)") from err
    found = loaded if isinstance(loaded, WorkloadContracts) else getattr(loaded, "contracts", None)
    if not isinstance(found, WorkloadContracts):
        raise WorkloadRegistrationError(f"{where} names a {type(loaded).__name__}; it must name a "
                                        "cake.verifier.registry.WorkloadContracts or an object whose "
                                        "`contracts` attribute is one")
    if found.name != entry_point.name:
        raise WorkloadRegistrationError(f"{where} names workload {found.name!r}: the entry point's name must be "
                                        "the workload's name")
    return found


_REGISTRY = _Registry()


def register(workload: WorkloadContracts) -> None:
    """Register a workload's contracts in this process (entry points do it for installed workloads)."""
    _REGISTRY.ops()  # installed workloads first, so a clash with one of them is caught here
    _REGISTRY.register(workload)


def get_contract(name: str) -> Contract:
    """The contract named `name`, or an error listing the known ops."""
    ops = _REGISTRY.ops()
    if name not in ops:
        raise UnknownOpError(f"unknown op `{name}`; known ops: {', '.join(sorted(ops)) or 'none'} (a workload "
                             f"registers its ops through the `{ENTRY_POINT_GROUP}` entry points: if a built-in "
                             "op is missing, reinstall CAKE with `pip install -e .`)")
    return ops[name].contract


def get_controls(name: str) -> Controls:
    """The correct controls the op's workload registered, or an error saying none were."""
    get_contract(name)
    controls = _REGISTRY.ops()[name].controls
    if controls is None:
        raise UnknownOpError(f"op `{name}` (workload {workload_of(name)!r}) registered no controls; add "
                             "`controls={...}` to its WorkloadContracts")
    return controls


def workload_of(name: str) -> str:
    """The name of the workload that registered op `name`."""
    get_contract(name)
    return _REGISTRY.ops()[name].workload


class _Contracts(Mapping[str, Contract]):
    """A read-only, live view of the registered contracts by op name (loads entry points on first use)."""

    def __getitem__(self, name: str) -> Contract:
        return get_contract(name)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(_REGISTRY.ops()))

    def __len__(self) -> int:
        return len(_REGISTRY.ops())


CONTRACTS: Mapping[str, Contract] = _Contracts()
