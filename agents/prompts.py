"""Every prompt the LLM agent sends, in one place.

The IR reference card is read from `cake.ir`'s README (the one the IR issue maintains), never copied
here; the op contract is read from the verifier's contract table. Prompts carry no secret and no path
of this machine: what the model sees is the op, the language, the parents and their feedback.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

from cake.diagnostics import Diagnostic, render_all

# Where the answer's schedule must be: the agent extracts the first block fenced like this.
FENCE_TAG = "cake"

SYSTEM = """\
You are a GPU kernel engineer. You write schedules in the CAKE IR: a typed, hardware-explicit schedule
language (warp roles, memory regions, synchronization, pipelining). A compiler checks every schedule
statically, lowers it to Triton or CUDA, verifies it against strict contract gates (fuzzed shapes that
are not multiples of any tile, NaN/Inf, subnormals) and times it against a tuned baseline. Only verified
schedules count; a faster schedule that fails one gate is worth nothing.

Rules for your answer:
- Reply with exactly ONE complete schedule inside one fenced block that starts with ```{fence} and ends
  with ```. Text outside the block is ignored.
- Keep `schedule NAME implements {op}` and the tensor signature of the parent unless asked otherwise.
- Every tunable `param` needs a default inside its domain; the default is the configuration that runs.
- Mask every tile that can run past a tensor's end (`masked`).

The CAKE IR reference card:

{card}
"""

CONTRACT = """\
The op contract `{name}`:
  inputs:  {inputs}
  outputs: {outputs}
  dtypes:  {dtypes}
  semantics:
{semantics}
Target: {arch}. The schedule's `target` line must name it.
"""

PROPOSE = """\
{contract}
Parent schedule(s), best first, with what we measured:

{parents}

{feedback}Write one new schedule for `{op}` that you expect to be faster than the best parent on {arch}
while still passing every gate. Change something that matters for speed: tile shapes, pipeline depth,
copy mechanism, warp roles and register budgets, persistent scheduling, ping-pong consumers, swizzles.
Say in one line before the block what you changed and why. Then the schedule in one ```{fence} block.
"""

PARENT = """\
### parent #{id} ({status}{fitness})
```{fence}
{text}
```
"""

FEEDBACK = """\
Recent failures to learn from (candidate: what went wrong):
{lines}

"""

REPAIR = """\
The compiler rejected your schedule:

{diagnostics}

Fix these problems and reply with the whole corrected schedule in one ```{fence} block.
"""

DUPLICATE = """\
That schedule has already been evaluated in this run. Propose a different one (change something that matters
for speed) and reply with the whole schedule in one ```{fence} block.
"""

NO_BLOCK = """\
Your answer contained no ```{fence} block with a schedule. Reply with the whole schedule in one ```{fence}
block.
"""


@functools.lru_cache(maxsize=1)
def reference_card() -> str:
    """The IR reference card, from `cake.ir`'s packaged README."""
    return (resources.files("cake.ir") / "README.md").read_text(encoding="utf-8")


@dataclass(frozen=True, slots=True)
class ParentView:
    """What the prompt says about one parent: its text and its measured standing."""

    id: int
    text: str
    status: str
    fitness: float | None
    fitness_kind: str | None


def system_prompt(op: str) -> str:
    return SYSTEM.format(fence=FENCE_TAG, op=op, card=reference_card().strip())


def contract_text(op: str, arch: str) -> str:
    from cake.verifier.registry import get_contract

    contract = get_contract(op)

    def spec(s: object) -> str:
        name, dims, rule = s.name, s.dims, s.dtype_rule  # type: ignore[attr-defined]
        return f"{name}[{', '.join(dims)}] ({rule})"

    dtypes = ", ".join(str(d).removeprefix("torch.") for d in contract.dtypes)
    semantics = "\n".join(f"    - {line}" for line in contract.semantics)
    return CONTRACT.format(name=contract.name, inputs="; ".join(spec(s) for s in contract.inputs),
                           outputs="; ".join(spec(s) for s in contract.outputs), dtypes=dtypes,
                           semantics=semantics, arch=arch)


def propose_prompt(op: str, arch: str, parents: Sequence[ParentView], failures: Sequence[str]) -> str:
    blocks = []
    for p in parents:
        fitness = "" if p.fitness is None else f", speedup {p.fitness:.3f}x ({p.fitness_kind})"
        blocks.append(PARENT.format(id=p.id, status=p.status, fitness=fitness, fence=FENCE_TAG, text=p.text.strip()))
    feedback = FEEDBACK.format(lines="\n".join(f"- {line}" for line in failures)) if failures else ""
    return PROPOSE.format(contract=contract_text(op, arch), parents="\n".join(blocks), feedback=feedback, op=op,
                          arch=arch, fence=FENCE_TAG)


def repair_prompt(diagnostics: Sequence[Diagnostic], source: str) -> str:
    return REPAIR.format(diagnostics=render_all(diagnostics, source), fence=FENCE_TAG)


def duplicate_prompt() -> str:
    return DUPLICATE.format(fence=FENCE_TAG)


def no_block_prompt() -> str:
    return NO_BLOCK.format(fence=FENCE_TAG)
