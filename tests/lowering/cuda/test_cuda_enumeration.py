"""Issue 12's "Must show": for every shipped schedule targeting sm_80, sm_90a or sm_100a, each value of each
param domain, each dtype choice and each mma width the target's table lists (with and without the column
tile resized to it) is either refused by the checker with a located diagnostic, or lowered by the CUDA backend
and compiled by nvcc for that arch. Never "the checker accepted it but it does not compile".

CI: every variant is checked and lowered (no compiler needed); a seeded sample of the accepted ones (plus the
`BK = 96` / `wgmma.m64n96k16` case of the issue) is compiled with nvcc. The whole enumeration compiles every
accepted variant: the slow test here, or `python scripts/bench_compile_enumeration.py`.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from bench_compile_enumeration import Outcome, Variant, all_variants, judge
from cuda_cases import HAVE_NVCC, NO_NVCC

SAMPLE = 6  # nvcc compiles in CI: about 1-3 s each on two cores
SEED = int(os.environ.get("CAKE_ENUMERATION_SEED", "0"))
FULL = os.environ.get("CAKE_FULL_ENUMERATION") == "1"
ISSUE_CASE = ("experiments/kmeans/assign_pingpong.cake", "wgmma.m64n96k16 BK=96")


@pytest.fixture(scope="module")
def variants() -> list[Variant]:
    return all_variants()


@pytest.fixture(scope="module")
def lowered(variants: list[Variant]) -> list[Outcome]:
    return [judge(v, compile_it=False) for v in variants]


def _failures(outcomes: list[Outcome]) -> list[str]:
    return [f"{o.schedule} [{o.label}] @ {o.arch}: {o.why}" for o in outcomes if o.verdict == "failed"]


def test_the_enumeration_covers_domains_dtypes_and_widths(variants: list[Variant]) -> None:
    labels = {(v.schedule, v.label) for v in variants}
    assert ISSUE_CASE in labels
    assert ("experiments/kmeans/assign_pingpong.cake", "wgmma.m64n32k16") in labels  # evolve's proposal
    assert ("experiments/kmeans/assign_tcgen05.cake", "tcgen05.m128n48k16 BK=48") in labels
    assert ("experiments/kmeans/assign_cp_async.cake", "STAGES=5") in labels
    assert {v.schedule.split("/")[-1] for v in variants} >= {"assign_pingpong.cake", "assign_cp_async.cake",
                                                            "assign_tcgen05.cake", "assign_plain.cake"}


def test_every_variant_is_refused_with_a_location_or_lowers(lowered: list[Outcome]) -> None:
    assert not _failures(lowered), "\n".join(_failures(lowered))
    refused = [o for o in lowered if o.verdict == "refused"]
    accepted = [o for o in lowered if o.verdict == "accepted"]
    assert refused and accepted  # both outcomes occur: the enumeration exercises the checker
    # A width that does not tile the default column tile is the checker's refusal, not nvcc's.
    n96 = next(o for o in lowered if (o.schedule, o.label) == (ISSUE_CASE[0], "wgmma.m64n96k16"))
    assert n96.verdict == "refused" and n96.codes == ["E0504"]


@pytest.mark.skipif(not HAVE_NVCC, reason=NO_NVCC)
def test_a_seeded_sample_of_accepted_variants_compiles(variants: list[Variant], lowered: list[Outcome],
                                                       tmp_path: Path) -> None:
    accepted = [i for i, o in enumerate(lowered) if o.verdict == "accepted"]
    issue = next(i for i, v in enumerate(variants) if (v.schedule, v.label) == ISSUE_CASE)
    chosen = sorted({issue, *random.Random(SEED).sample(accepted, min(SAMPLE, len(accepted)))})
    outcomes = [judge(variants[i], compile_it=True, cache_root=tmp_path) for i in chosen]
    assert not _failures(outcomes), f"seed {SEED}:\n" + "\n".join(_failures(outcomes))
    assert all(o.verdict == "compiled" for o in outcomes), [(o.label, o.verdict) for o in outcomes]


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_NVCC, reason=NO_NVCC)
@pytest.mark.skipif(not FULL, reason="the full enumeration compiles every accepted variant (~140 nvcc runs, minutes): "
                    "set CAKE_FULL_ENUMERATION=1, or run scripts/bench_compile_enumeration.py")
def test_every_accepted_variant_compiles(variants: list[Variant], lowered: list[Outcome], tmp_path: Path) -> None:
    outcomes = [judge(v, compile_it=True, cache_root=tmp_path) if o.verdict == "accepted" else o
                for v, o in zip(variants, lowered, strict=True)]
    assert not _failures(outcomes), "\n".join(_failures(outcomes))
    assert {o.verdict for o in outcomes} == {"refused", "compiled"}
