"""The offline agent's repair of register refusals on a setmaxnreg kernel: the register file is re-split (the tiles
and stages the operator chose are kept), where stepping tiles down cannot help (session 21's GPU seeds refused 22
children with E0302 after moving a register budget up, each "repaired" by shrinking tiles and stages)."""

from __future__ import annotations

import random

from cake.agents.mutations import with_param_default
from cake.agents.offline import repair_for
from cake.agents.validation import make_validator
from cake.experiments.workload import get_workload
from cake.ir import nodes as n
from cake.ir.parser import parse
from cake.ir.printer import print_kernel
from cake.ir.transforms import apply
from cake.ir.transforms.bind_params import bind_params
from cake.ir.transforms.fit_consumer_regs import fit_consumer_regs
from cake.ir.transforms.warp_specialize import warp_specialize
from conftest import SEED

from cake.diagnostics import Diagnostic

DIMS = get_workload("flash_kmeans").fitness_shape("kmeans_assign").dim_map
VALIDATE = make_validator("sm_90a", "cuda", dims=DIMS)


def _specialized(**values: int) -> n.Kernel:
    kernel = warp_specialize(parse(SEED.read_text()))
    assert kernel is not None
    return apply(fit_consumer_regs, bind_params(kernel, values))


def _regs(kernel: n.Kernel) -> dict[str, int]:
    return {p.name: p.default for p in kernel.params if p.name.endswith("_REGS")}


def _repaired(kernel: n.Kernel, code: str) -> n.Kernel:
    checked = VALIDATE(print_kernel(kernel))
    assert {d.code for d in checked.errors} == {code}, [d.message for d in checked.errors]
    assert checked.kernel is not None
    fixed = repair_for(checked.kernel, checked.errors, random.Random(0))
    assert fixed is not None and fixed.description == f"registers re-split ({code})"
    assert VALIDATE(print_kernel(fixed.kernel)).ok
    return fixed.kernel


def test_a_budget_moved_over_the_file_is_repaired_by_refitting_the_consumers() -> None:
    start = _specialized(PRODUCER_REGS=24, BN=128, BK=64)
    assert _regs(start) == {"PRODUCER_REGS": 24, "CONSUMER_REGS": 240}
    over = with_param_default(start, "PRODUCER_REGS", 32)  # 128 x 32 + 256 x 240 > the file
    fixed = _repaired(over, "E0302")
    assert _regs(fixed) == {"PRODUCER_REGS": 32, "CONSUMER_REGS": 232}
    assert {p.name: p.default for p in fixed.params if p.name in ("BN", "BK")} == {"BN": 128, "BK": 64}


def test_an_accumulator_short_of_registers_takes_the_copy_roles_idle_ones() -> None:
    # three consumers beside a 248-register producer are left 88 registers each; the 128 x 128 accumulator needs 128
    short = _specialized(PRODUCER_REGS=248, CONSUMERS=3, BN=128, BK=128)
    assert _regs(short) == {"PRODUCER_REGS": 248, "CONSUMER_REGS": 88}
    fixed = _repaired(short, "E0307")
    assert _regs(fixed) == {"PRODUCER_REGS": 24, "CONSUMER_REGS": 160}


def test_other_refusals_still_shrink() -> None:
    start = _specialized(PRODUCER_REGS=24, STAGES=4)
    refusal = Diagnostic("E0301", "shared memory over budget in launch `main`", subject="shared buffer `ct_s`")
    fixed = repair_for(start, (refusal,), random.Random(0))
    assert fixed is not None and "registers" not in fixed.description
    assert any(p.default < q.default for p, q in zip(fixed.kernel.params, start.params, strict=True))
    # a register refusal beside another kind of error is not only a register split: it shrinks too
    mixed = (Diagnostic("E0302", "register file over budget"), refusal)
    fixed = repair_for(_specialized(PRODUCER_REGS=24), mixed, random.Random(0))
    assert fixed is not None and "registers" not in fixed.description
