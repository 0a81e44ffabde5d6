"""Thread-block clusters in the CUDA backend (`cluster tile CLUSTER`, `via tma multicast`, `arrive ... cluster`),
read off the generated source of `assign_pingpong_mc.cake` and compiled with nvcc (never run here: the H200 runs
it, `scripts/gpu_assign_variants.py`).

- a cluster of C CTAs: `__cluster_dims__(C, 1, 1)`, the rank, a cluster barrier after the mbarrier init and before
  exit; each centroid box issued as this CTA's slice of C into every CTA; the consumers' release of a stage counted
  in every CTA (2 roles x 4 warps x C per phase) and the producer's wait on it acquiring at cluster scope;
- the persistent grid walks work units of C tiles, so a cluster's CTAs run the same units;
- CLUSTER = 1 generates none of it: the schedule is then the plain ping-pong;
- the host's grid is whole clusters, the same in the backend and the exported runtime."""

from __future__ import annotations

import re

import pytest
from cake.ir.nodes import DType
from cake.ir.transforms.cluster_multicast import cluster_multicast
from cake.lowering.cuda.compile import compile_cubin
from cake.lowering.cuda.launch import grid_dims
from cake.lowering.cuda.program import generate
from cuda_cases import HAVE_NVCC, NO_NVCC, compiled_child, edited, pass_children

from cake.export.runtime._kernels import grid_dims as exported_grid_dims

MC = "experiments/kmeans/assign_pingpong_mc.cake"


def _program(ctas: int):  # type: ignore[no-untyped-def]
    kernel, _ = edited(MC, "param CLUSTER = 2 in", f"param CLUSTER = {ctas} in")
    return generate(kernel, kernel.target, dtypes={"T": DType.BF16}, static_dims={"D": 128}, file=MC)


def _assign(source: str) -> str:
    return source[source.index("assign_pingpong_mc_assign(const"):]


@pytest.mark.parametrize("ctas", [2, 4])
def test_a_cluster_multicasts_each_centroid_slice_and_releases_stages_in_every_cta(ctas: int) -> None:
    program = _program(ctas)
    assign = _assign(program.source)
    code = next(c for c in program.launches if c.launch == "assign")
    assert code.cluster == ctas and f"__cluster_dims__({ctas}, 1, 1) __launch_bounds__(384, 1)" in program.source
    assert assign.count("cake_cluster_sync();") == 2  # after the mbarrier init, and before any CTA exits
    # each stage: two 64-column boxes of the centroid tile and one of ||c||^2, each this CTA's 1/C slice
    rows = 128 // ctas
    multicasts = re.findall(r"cake_tma_load_(\dd)_multicast\(([^;]*)\);", assign)
    assert [d for d, _ in multicasts] == ["3d", "3d", "2d"]
    assert all(f"static_cast<uint16_t>({(1 << ctas) - 1})" in args for _, args in multicasts)
    assert f"cake_crank * {rows * 128}u" in multicasts[0][1] and f"static_cast<int>(cake_crank) * {rows}" in multicasts[0][1]
    assert f"cake_crank * {rows * 4}u" in multicasts[2][1]  # 1/C of the 128 floats
    assert "cake_mbar_arrive_expect_tx(&c_full[s], 33280u)" in assign  # each CTA receives the whole stage
    assert f"cake_mbar_init(&c_empty[i], {2 * 4 * ctas});" in program.source
    assert f"cake_c < {ctas}u; ++cake_c) cake_mbar_arrive_cluster(&c_empty[s], cake_c)" in assign
    assert "cake_mbar_wait_cluster(&c_empty[s]" in assign and "cake_mbar_wait_cluster(&c_full" not in assign
    assert "cake_mbar_wait(&x_empty[w]" in assign  # the points' stages stay per CTA
    assert f"for (int cake_t = blockIdx.x / {ctas}; cake_t < (cake_cdiv(cake_cdiv(N, 256), {ctas})) * (B); " \
           f"cake_t += gridDim.x / {ctas})" in assign
    assert f"const int tile = (cake_t % (cake_cdiv(cake_cdiv(N, 256), {ctas}))) * {ctas} + " \
           "static_cast<int>(cake_crank);" in assign


def test_a_cluster_of_one_generates_the_plain_ping_pong() -> None:
    program = _program(1)
    assert all(c.cluster == 1 for c in program.launches)
    for construct in ("__cluster_dims__", "cake_crank", "multicast(", "cake_mbar_arrive_cluster(", "cake_cluster_sync",
                      "cake_mbar_wait_cluster("):
        assert construct not in _assign(program.source), construct
    assert "cake_mbar_init(&c_empty[i], 8);" in program.source


@pytest.mark.skipif(not HAVE_NVCC, reason=NO_NVCC)
def test_a_cluster_of_four_compiles_without_spills() -> None:
    program = _program(4)
    module = compile_cubin(program.source, program.arch, smem_dynamic_bytes={c.kname: c.smem_bytes for c in program.launches},
                           tmem_columns={c.kname: c.tmem_columns for c in program.launches}, file=MC)
    assign = module.report.kernel("assign_pingpong_mc_assign")
    assert assign.spill_bytes == 0 and assign.registers <= 168


@pytest.mark.parametrize(("extents", "persistent", "cluster", "resident", "grid"), [
    ((256, 32), True, 1, None, (132, 1, 1)),  # one CTA per SM
    ((256, 32), True, 2, 66, (132, 1, 1)),  # every SM pairs up
    ((256, 32), True, 4, 30, (120, 1, 1)),  # 12 SMs cannot join a cluster of 4: no cluster waits for a second wave
    ((3, 1), True, 2, 66, (4, 1, 1)),  # two units of two tiles: the fourth CTA runs past the extent, masked
    ((5, 1), True, 8, 16, (8, 1, 1)),  # one unit: never fewer CTAs than a cluster
    ((7, 4), False, 2, None, (8, 4, 1)),  # a tile grid rounded up along x only
    ((7, 4), False, 1, None, (7, 4, 1)),
])
def test_the_host_launches_whole_clusters_in_the_backend_and_the_exported_runtime(
        extents: tuple[int, ...], persistent: bool, cluster: int, resident: int | None,
        grid: tuple[int, int, int]) -> None:
    assert grid_dims(extents, persistent, 132, cluster, resident) == grid
    assert exported_grid_dims(extents, persistent, 132, cluster, resident) == grid


def test_a_persistent_clustered_grid_is_never_sized_without_the_resident_clusters() -> None:
    for dims in (grid_dims, exported_grid_dims):
        with pytest.raises(ValueError, match="clusters the device holds at once"):
            dims((256, 32), True, 132, 2)


@pytest.mark.skipif(not HAVE_NVCC, reason=NO_NVCC)
@pytest.mark.parametrize("rel", pass_children(cluster_multicast), ids=lambda rel: rel.split("/")[-1])
def test_every_schedule_the_search_can_cluster_compiles(rel: str) -> None:
    program, module = compiled_child(rel, cluster_multicast)
    assert any(c.cluster == 2 for c in program.launches) and module.cubin[:4] == b"\x7fELF"
