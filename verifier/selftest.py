"""The verifier tests itself: mutants of correct controls through the whole battery (`cake verify --self-test`).

For every op, every control source (torch, sequential fp32 loops, Triton) and every mutation operator
(mutants.py), the battery runs with all gates on the mutant. A mutant is *killed* when some gate fails it
(FAIL, TIMEOUT or RUNTIME_ERROR); the report counts kills per gate (over the mutants the gate judged) and
per mutation class, and lists every survivor with the argument for it: `EQUIVALENT` holds the mutants argued
equivalent (no input the contract allows tells them from the control); a survivor without an argument is a
gap in the gates and is printed as UNACCOUNTED. The controls themselves must pass first.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from cake.verifier.battery import run_battery
from cake.verifier.contracts import Contract
from cake.verifier.gates import GATE_ORDER
from cake.verifier.mutants import OPERATORS, MutationClass, mutants_of
from cake.verifier.registry import CONTRACTS, get_contract, get_controls
from cake.verifier.results import Verdict
from cake.verifier.tolerance import dtype_name

CONTROL_SOURCES = ("torch", "sequential", "triton")

# Survivors argued equivalent whatever the op: (operator, control source, dtype name), "*" for any -> the
# argument. Arguments about one op's controls are the workload's (`Controls.equivalent_mutants`).
EQUIVALENT: dict[tuple[str, str, str], str] = {
    ("ACC-INPUT-DTYPE", "*", "float32"): "fp32 inputs: the input dtype is fp32, so the mutant is the control",
}


@dataclass(frozen=True, slots=True)
class MutantOutcome:
    op: str
    control: str
    operator: str
    cls: MutationClass
    applicable: bool
    killed_by: tuple[str, ...] = ()  # gates that failed the mutant
    judged_by: tuple[str, ...] = ()  # gates that ran on it (not SKIP)
    note: str = ""  # why not applicable, or the equivalence argument of a survivor

    @property
    def killed(self) -> bool:
        return bool(self.killed_by)

    @property
    def survived(self) -> bool:
        return self.applicable and not self.killed

    @property
    def accounted(self) -> bool:
        return not self.survived or bool(self.note)


@dataclass
class SelfTestReport:
    device: str
    dtypes: tuple[str, ...]
    outcomes: list[MutantOutcome] = field(default_factory=list)
    control_failures: list[str] = field(default_factory=list)  # a control that did not pass its own battery

    @property
    def mutants(self) -> list[MutantOutcome]:
        return [o for o in self.outcomes if o.applicable]

    @property
    def survivors(self) -> list[MutantOutcome]:
        return [o for o in self.outcomes if o.survived]

    @property
    def unaccounted(self) -> list[MutantOutcome]:
        return [o for o in self.survivors if not o.accounted]

    def per_gate(self) -> list[tuple[str, int, int]]:
        """(gate, mutants it killed, mutants it judged), in battery order."""
        rows = []
        for gate in GATE_ORDER:
            judged = [o for o in self.mutants if gate in o.judged_by]
            rows.append((gate, sum(gate in o.killed_by for o in judged), len(judged)))
        return rows

    def per_class(self) -> list[tuple[MutationClass, int, int]]:
        """(class, mutants killed, mutants run)."""
        rows = []
        for cls in MutationClass:
            run = [o for o in self.mutants if o.cls is cls]
            rows.append((cls, sum(o.killed for o in run), len(run)))
        return rows

    def per_operator(self) -> list[tuple[str, int, int]]:
        rows = []
        for op_id in OPERATORS:
            run = [o for o in self.mutants if o.operator == op_id]
            rows.append((op_id, sum(o.killed for o in run), len(run)))
        return rows


def equivalence(operator: str, op: str, control: str, dtypes: Sequence[str]) -> str:
    """The argument for a survivor, when one holds in every dtype the self-test ran: the op's workload's
    (`Controls.equivalent_mutants`) or an op-agnostic one (`EQUIVALENT`)."""
    arguments = {**EQUIVALENT, **get_controls(op).equivalent_mutants}
    notes = []
    for dtype in dtypes:
        keys = [(operator, c, d) for c in (control, "*") for d in (dtype, "*")]
        note = next((arguments[k] for k in keys if k in arguments), None)
        if note is None:
            return ""
        notes.append(note)
    return "; ".join(dict.fromkeys(notes))


def control_for(source: str, op: str) -> Callable[..., object] | None:
    """The op's control of this kind (torch, sequential, triton), or None when its workload registered none."""
    controls = get_controls(op)
    if source == "torch":
        return controls.torch
    if source == "sequential":
        return controls.sequential
    if source == "triton":
        return controls.triton_kernel()
    raise ValueError(f"unknown control source `{source}`; known: {', '.join(CONTROL_SOURCES)}")


def default_sources(device: str) -> tuple[str, ...]:
    """Triton controls only where Triton runs them: on a GPU, or under the interpreter when it is on."""
    triton_ok = device.startswith("cuda") or os.environ.get("TRITON_INTERPRET") == "1"
    return CONTROL_SOURCES if triton_ok else CONTROL_SOURCES[:2]


def _outcome(verdict: Verdict) -> tuple[tuple[str, ...], tuple[str, ...]]:
    killed = tuple(g.gate_id for g in verdict.gates if g.status.is_failure)
    judged = tuple(g.gate_id for g in verdict.gates if g.status.value != "SKIP")
    return killed, judged


def _battery(contract: Contract, kernel: Callable[..., object], *, device: str, dtypes: Sequence[str], seed: int,
             interpreter: bool, gates: Sequence[str] | None) -> Verdict:
    return run_battery(contract, kernel, device=device, dtypes=dtypes, seed=seed, all_gates=True,
                       interpreter=interpreter, gates=gates)


def run_self_test(ops: Sequence[str] | None = None, *, device: str = "cpu", dtypes: Sequence[str] = ("float32",),
                  sources: Sequence[str] | None = None, operators: Sequence[str] | None = None,
                  gates: Sequence[str] | None = None, seed: int = 0,
                  progress: Callable[[MutantOutcome], None] | None = None) -> SelfTestReport:
    names = list(ops) if ops else list(CONTRACTS)
    report = SelfTestReport(device, tuple(dtypes))
    for source in sources or default_sources(device):
        interpreter = source == "triton" and device == "cpu"
        for name in names:
            contract = get_contract(name)
            control = control_for(source, name)
            if control is None:
                continue
            wanted = [d for d in dtypes if not (interpreter and d == "bfloat16")]
            battery = functools.partial(_battery, contract, device=device, dtypes=wanted, seed=seed,
                                        interpreter=interpreter, gates=gates)
            base = battery(control)
            if not base.passed:
                report.control_failures.append(f"{source} {name}: " + "; ".join(
                    f"{g.gate_id} {g.reason}" for g in base.failures))
                continue
            for op, mutant, why in mutants_of(contract, control, device=device, torch_control=source != "triton",
                                              only=operators):
                if mutant is None:
                    outcome = MutantOutcome(name, source, op.op_id, op.cls, False, note=why)
                else:
                    killed, judged = _outcome(battery(mutant))
                    note = "" if killed else equivalence(op.op_id, name, source, wanted)
                    outcome = MutantOutcome(name, source, op.op_id, op.cls, True, killed, judged, note)
                report.outcomes.append(outcome)
                if progress is not None:
                    progress(outcome)
    return report


def format_report(report: SelfTestReport) -> str:
    """Plain-text tables (markdown): kills per gate, per class, per operator, then survivors."""
    lines = [f"self-test on {report.device}, dtypes {', '.join(report.dtypes)}: "
             f"{sum(o.killed for o in report.mutants)}/{len(report.mutants)} mutants killed, "
             f"{len(report.survivors)} survived ({len(report.unaccounted)} unaccounted)", ""]
    lines += ["| gate | killed | judged | kill score |", "|---|---|---|---|"]
    for gate, killed, judged in report.per_gate():
        score = f"{killed / judged:.0%}" if judged else "—"
        lines.append(f"| {gate} | {killed} | {judged} | {score} |")
    lines += ["", "| mutation class | killed | mutants | kill score |", "|---|---|---|---|"]
    for cls, killed, run in report.per_class():
        score = f"{killed / run:.0%}" if run else "—"
        lines.append(f"| {cls.value} | {killed} | {run} | {score} |")
    lines += ["", "| operator | killed | mutants |", "|---|---|---|"]
    for op_id, killed, run in report.per_operator():
        lines.append(f"| {op_id} | {killed} | {run} |")
    na = sorted({(o.operator, o.note) for o in report.outcomes if not o.applicable})
    if na:
        lines += ["", "not applicable: " + "; ".join(f"{op} ({why})" for op, why in na)]
    if report.survivors:
        lines += ["", "survivors:"]
        for o in report.survivors:
            lines.append(f"- {o.op} · {o.control} · {o.operator}: {o.note or 'UNACCOUNTED (a gap in the gates)'}")
    for failure in report.control_failures:
        lines.append(f"CONTROL FAILED its own battery: {failure}")
    return "\n".join(lines)


__all__ = ["CONTROL_SOURCES", "EQUIVALENT", "MutantOutcome", "SelfTestReport", "dtype_name", "format_report",
           "run_self_test"]
