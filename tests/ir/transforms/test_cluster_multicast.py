"""cluster_multicast: Before/Expected in CAKE's own syntax (the checker's ping-pong fixture), the accesses it masks,
and the launches it leaves alone."""

from __future__ import annotations

import pytest
from cake.ir.check import check
from cake.ir.checks.fixtures import PINGPONG
from cake.ir.parser import parse
from cake.ir.transforms.cluster_multicast import cluster_multicast, sizes

from cake.diagnostics import Severity

EXPECTED = (PINGPONG
            .replace("param STAGES = 4 in 2 .. 5\n", "param STAGES = 4 in 2 .. 5\nparam CLUSTER = 2 in {1, 2, 4, 8}\n")
            .replace("grid persistent tile in cdiv(N, 2*BN), b in B\n",
                     "grid persistent tile in cdiv(N, 2*BN), b in B\ncluster tile CLUSTER\n")
            .replace("mbarrier c_empty[STAGES] arrivals 2 free", "mbarrier c_empty[STAGES] arrivals 2 * CLUSTER free")
            .replace("-> cs[s] via tma masked", "-> cs[s] via tma multicast masked")
            .replace("-> csq[s] via tma masked", "-> csq[s] via tma multicast masked")
            .replace("    arrive c_empty[s]\n", "    arrive c_empty[s] cluster\n"))


def test_the_centroid_stages_are_multicast_and_released_in_every_cta() -> None:
    # The points' tile depends on `tile` (each CTA its own); the centroid stages and their norms do not.
    out = cluster_multicast(parse(PINGPONG))
    assert out == parse(EXPECTED)
    assert [d for d in check(out) if d.severity is Severity.ERROR] == []


def test_accesses_indexed_by_the_clustered_axis_are_masked() -> None:
    # The grid is rounded up to whole clusters: the last cluster's CTAs may start past the extent.
    unmasked = PINGPONG.replace("store besti -> ids[b, tile*2*BN + w*BN : +BN] masked",
                                "store besti -> ids[b, tile*2*BN + w*BN : +BN]")
    out = cluster_multicast(parse(unmasked))
    assert out == parse(EXPECTED)


def test_the_size_domain_is_every_cluster_the_target_allows() -> None:
    assert sizes(8) == (1, 2, 4, 8) and sizes(1) == (1,)


@pytest.mark.parametrize("change, why", [
    (("target sm_90a", "target sm_80"), "no clusters on the target"),
    (("    copy c[b, k*BK : +BK, :] -> cs[s] via tma masked signals c_full[s]\n"
      "    copy csq_g[b, k*BK : +BK] -> csq[s] via tma masked signals c_full[s]\n",
      "    copy c[b, tile + k*BK : +BK, :] -> cs[s] via tma masked signals c_full[s]\n"
      "    copy csq_g[b, tile + k*BK : +BK] -> csq[s] via tma masked signals c_full[s]\n"),
     "every CTA reads its own centroids"),
    (("  for k in 0 .. cdiv(K, BK) pipelined STAGES as s {\n    wait c_full[s]",
      "  for k in 0 .. cdiv(K, BK) + tile % 2 pipelined STAGES as s {\n    wait c_full[s]"),
     "the CTAs would run different loops"),
])
def test_nothing_to_do(change: tuple[str, str], why: str) -> None:
    assert PINGPONG.count(change[0]) == 1
    text = PINGPONG.replace(*change)
    assert cluster_multicast(parse(text)) is None, why


def test_a_clustered_launch_is_left_alone() -> None:
    assert cluster_multicast(parse(EXPECTED)) is None
