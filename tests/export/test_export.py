"""`cake export` / `cake certify` on the CPU: export a Triton and a CUDA schedule, import the packages from their
paths, and check the torch.library contract, torch.compile, the fallback, bad input, integrity and certify."""

from __future__ import annotations

import collections
import importlib
import importlib.util
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import tomllib
import torch

from cake.cli import main
from cake.export import ExportError, export_package
from cake.export.certify import certify
from tests.export.packages import CUDA_PKG, FK, TRITON_PKG

# A CPU call of a CUDA-only package runs the reference and warns once with the package's own warning class; under
# pytest-xdist an uncaught warning whose class lives in a package the controller cannot import crashes the run
# (INTERNALERROR), so the warning is silenced here and asserted where it matters (the fallback test).
pytestmark = pytest.mark.filterwarnings("ignore:.*falling back to the reference implementation:UserWarning")


def _kmeans_inputs(dtype: torch.dtype = torch.float32, n: int = 97, k: int = 19, d: int = 32) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(0)
    return torch.randn(2, n, d, generator=gen).to(dtype), torch.randn(2, k, d, generator=gen).to(dtype)


def test_package_layout(triton_export: Path) -> None:
    project = tomllib.loads((triton_export / "pyproject.toml").read_text())["project"]
    assert project["dependencies"] == ["torch", "triton"]
    entry = f"{TRITON_PKG}._plugins:register"
    assert project["entry-points"]["vllm.general_plugins"] == {TRITON_PKG: entry}
    assert project["entry-points"]["sglang.srt.plugins"] == {TRITON_PKG: entry}
    pkg = triton_export / TRITON_PKG
    for path in pkg.glob("*.py"):  # the runtime needs nothing of CAKE
        assert "from cake" not in path.read_text() and "import cake" not in path.read_text(), path
    cert = json.loads((pkg / "certificate.json").read_text())
    assert set(cert["ops"]) == {"kmeans_assign", "kmeans_update"}
    variant = cert["variants"]["v0"]
    assert variant["schedule"] == "assign_plain" and len(variant["ir_hash"]) >= 16
    assert variant["schedule_text"] == (FK / "assign_plain.cake").read_text()
    assert {"torch", "triton", "nvcc", "python"} <= set(cert["toolchain"])
    assert cert["ops"]["kmeans_assign"]["contract"]["name"] == "kmeans_assign"
    assert len(cert["ops"]["kmeans_assign"]["contract_sha256"]) == 64


def test_opcheck_every_op(triton_pkg: ModuleType) -> None:
    ops = getattr(torch.ops, TRITON_PKG)
    x, c = _kmeans_inputs()
    ids = ops.kmeans_assign(x, c)
    assert ids.dtype == torch.int32 and ids.shape == (2, 97)
    torch.library.opcheck(ops.kmeans_assign.default, (x, c))
    torch.library.opcheck(ops.kmeans_update.default, (x, ids.long(), c))
    torch.library.opcheck(ops.kmeans_assign_reference.default, (x, c))


def test_cuda_package_opcheck_on_cpu(cuda_pkg: ModuleType) -> None:
    ops = getattr(torch.ops, CUDA_PKG)
    x, c = _kmeans_inputs(torch.bfloat16, d=64)
    torch.library.opcheck(ops.kmeans_assign.default, (x, c))
    expected = ops.kmeans_assign_reference(x, c)
    assert torch.equal(ops.kmeans_assign(x, c), expected)


def test_compile_fullgraph_runs_fake_and_cpu_impl(triton_pkg: ModuleType, cuda_pkg: ModuleType) -> None:
    x, c = _kmeans_inputs()
    lloyd = torch.compile(lambda x, c: triton_pkg.update(x, triton_pkg.assign(x, c), c), fullgraph=True,
                          backend="aot_eager")
    ids = torch.ops.aten.argmin(torch.cdist(x.double(), c.double()) ** 2, -1)
    assert torch.allclose(lloyd(x, c), triton_pkg.update(x, ids, c))
    xb, cb = _kmeans_inputs(torch.bfloat16, d=64)
    cuda_assign = torch.compile(lambda x, c: getattr(torch.ops, CUDA_PKG).kmeans_assign(x, c) + 1, fullgraph=True,
                                backend="aot_eager")
    assert torch.equal(cuda_assign(xb, cb), getattr(torch.ops, CUDA_PKG).kmeans_assign_reference(xb, cb) + 1)


def test_kmeans_lloyd_loop(triton_pkg: ModuleType) -> None:
    x, _ = _kmeans_inputs()
    centroids, ids = triton_pkg.kmeans(x, 5, 3)
    assert centroids.shape == (2, 5, 32) and ids.shape == (2, 97)
    assert torch.equal(ids, triton_pkg.assign(x, centroids))  # a Lloyd loop ends on an assign step
    flat_c, flat_ids = triton_pkg.kmeans(x[0], 5, 3)
    assert flat_c.shape == (5, 32) and torch.equal(flat_ids, ids[0])
    with pytest.raises(ValueError, match="k = 98"):
        triton_pkg.kmeans(x, 98, 1)


# Run with TRITON_INTERPRET=1 from the start (triton.jit reads it when triton is imported): CPU tensors then take
# the Triton kernels, routed as on a GPU, and `cake certify --device cpu` can run them.
INTERPRETED = """
import json, sys, warnings
import torch
from cake.export.certify import certify, import_package
from pathlib import Path
pkg = import_package(Path(sys.argv[1]))
ops = getattr(torch.ops, pkg.namespace)
op = pkg.PACKAGE.ops["kmeans_assign"]
gen = torch.Generator().manual_seed(0)
x, c = torch.randn(2, 97, 32, generator=gen), torch.randn(2, 19, 32, generator=gen)
in_domain = type(op.route((x, c))).__name__
same = torch.equal(pkg.assign(x, c), ops.kmeans_assign_reference(x, c))
counts_in = pkg.fallback_counts()["kmeans_assign"]
x, c = torch.randn(2, 5, 32, generator=gen), torch.randn(2, 1100, 32, generator=gen)  # K > 1024: outside
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    first = pkg.assign(x, c)
    pkg.assign(x, c)
warned = [str(w.message) for w in caught if issubclass(w.category, pkg.OutOfDomainWarning)]
rows = certify(Path(sys.argv[1]), device="cpu", dtypes=("float32",), gates=("CMP-01",))
print(json.dumps({"in_domain": in_domain, "same": same, "counts_in": counts_in, "warned": warned,
                  "counts": pkg.fallback_counts()["kmeans_assign"], "fallback_equal":
                  torch.equal(first, ops.kmeans_assign_reference(x, c)), "rows": rows}))
"""


@pytest.fixture(scope="module")
def interpreted(triton_export: Path) -> dict[str, Any]:
    env = {**os.environ, "TRITON_INTERPRET": "1", "CAKE_EXPORT_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", INTERPRETED, str(triton_export)], capture_output=True, text=True,
                          env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_out_of_domain_falls_back_and_counts(interpreted: dict[str, Any]) -> None:
    assert interpreted["in_domain"] == "function" and interpreted["same"]  # the Triton kernel, interpreted
    assert interpreted["counts_in"] == {}
    reason = "outside the shape domain: K=1100 not in [1, 1024]"
    assert len(interpreted["warned"]) == 1 and reason in interpreted["warned"][0]  # warned once
    assert interpreted["counts"] == {reason: 2}  # counted every time
    assert interpreted["fallback_equal"]


def test_certify_appends_a_row(interpreted: dict[str, Any], triton_export: Path, triton_pkg: ModuleType) -> None:
    rows = interpreted["rows"]
    # a row per entry point: the op and its out-variant (outputs and workspace sized as a caller sizes them)
    assert [(r["op"], r["entry"]) for r in rows] == [
        ("kmeans_assign", "kmeans_assign"), ("kmeans_assign", "kmeans_assign_out"),
        ("kmeans_update", "kmeans_update"), ("kmeans_update", "kmeans_update_out")]
    assert all(r["passed"] for r in rows)
    for row in rows:
        gate = row["verdict"]["gates"][0]
        assert gate["gate"] == "CMP-01" and gate["status"] == "PASS" and gate["cases"] > 0
    assert "Triton interpreter" in rows[0]["device"]
    stored = json.loads((triton_export / TRITON_PKG / "certificate.json").read_text())
    assert stored["certifications"][-4:] == rows
    assert triton_pkg._integrity.verify(triton_export / TRITON_PKG, stored) == {}  # certify keeps the hashes


def test_bad_input_errors(triton_pkg: ModuleType, cuda_pkg: ModuleType) -> None:
    ops = getattr(torch.ops, TRITON_PKG)
    x, c = _kmeans_inputs()
    with pytest.raises(TypeError, match=r"`x` is torch.float64; this op takes float32, float16, bfloat16"):
        ops.kmeans_assign(x.double(), c.double())
    with pytest.raises(TypeError, match=r"`c` is torch.float16, the other inputs torch.float32"):
        ops.kmeans_assign(x, c.half())
    with pytest.raises(ValueError, match=r"`x` must have 3 dims \[B, N, D\], got shape \(97, 32\)"):
        ops.kmeans_assign(x[0], c)
    with pytest.raises(ValueError, match=r"`c` dim 2 \(D\) is 16, but D = 32"):
        ops.kmeans_assign(x, c[..., :16])
    with pytest.raises(TypeError, match=r"`ids` must be int64, got torch.int32"):
        ops.kmeans_update(x, torch.zeros(2, 97, dtype=torch.int32), c)
    with pytest.raises(ValueError, match=r"`c` is on meta, `x` on cpu"):
        triton_pkg.PACKAGE.ops["kmeans_assign"].bind((x, c.to("meta")))
    # every input's device is in the route key: a route cached for one placement is never reused for another
    assert triton_pkg._ops.signature((x, c)) != triton_pkg._ops.signature((x, c.to("meta")))
    variant = cuda_pkg.PACKAGE.ops["kmeans_assign"].buckets[0][2][0]
    xb, cb = _kmeans_inputs(torch.bfloat16, d=64)
    assert "runs on CUDA devices only" in variant.accepts((xb, cb), "bf16", torch.device("cpu"))
    x128, c128 = _kmeans_inputs(torch.bfloat16, d=128)
    assert "compiled for ['T=bf16;D=64', 'T=f16;D=64'], not T=bf16;D=128" in variant.accepts(
        (x128, c128), "bf16", torch.device("cuda", 0))


def test_cuda_argument_blocks_match_the_generated_structs(cuda_export: Path, cuda_pkg: ModuleType) -> None:
    manifest = json.loads((cuda_export / CUDA_PKG / "manifest.json").read_text())
    spec = manifest["variants"]["v0"]["cuda"]["specs"][0]
    assert set(spec["cubins"]) == {"sm_90a"}
    for code in spec["codes"]:
        packer, order = cuda_pkg._cuda.arg_struct(code["args"], code["args_size"])
        values = [bytes([i]) * 128 if f["kind"] == "tmap" else i + 1 for i, f in enumerate(order)]
        block = bytearray(packer.size)
        packer.pack_into(block, 0, *values)
        for i, f in enumerate(order):  # every field lands at the offset nvcc static_asserts
            if f["kind"] == "tmap":
                assert block[f["offset"]:f["offset"] + 128] == bytes([i]) * 128
            else:
                fmt = {"ptr": "<Q", "stride": "<q", "dim": "<i"}[f["kind"]]
                assert struct.unpack_from(fmt, block, f["offset"])[0] == i + 1
    grid = cuda_pkg.PACKAGE.ops["kmeans_assign"].buckets[0][2][0].grids
    axes, persistent = grid["assign"]
    assert persistent and [f(32, 65536, 1024, 64) for f in axes] == [256, 32]


def _load_as(name: str, pkg: Path) -> None:
    spec = importlib.util.spec_from_file_location(name, pkg / "__init__.py", submodule_search_locations=[str(pkg)])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
            del sys.modules[key]


def test_tampered_kernel_source_refuses_import(triton_export: Path, tmp_path: Path) -> None:
    copy = tmp_path / TRITON_PKG
    shutil.copytree(triton_export / TRITON_PKG, copy, ignore=shutil.ignore_patterns("__pycache__"))
    kernel = next((copy / "kernels").glob("v0_*.py"))
    kernel.write_text(kernel.read_text().replace("tl.minimum(m, best)", "tl.maximum(m, best)"))
    with pytest.raises(ImportError, match=r"kmeans_assign: kernels/v0_assign_plain\.py: sha256 .* != certified") as err:
        _load_as("cake_test_tampered", copy)
    assert "kmeans_update" not in str(err.value)  # only the op whose code changed is named
    assert "CAKE_EXPORT_ALLOW_MODIFIED=1" in str(err.value)


def test_allow_modified_registers_with_a_warning(triton_export: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / TRITON_PKG
    shutil.copytree(triton_export / TRITON_PKG, copy, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = copy / "manifest.json"  # a namespace of its own, so the copy's ops do not clash with the original's
    manifest.write_text(manifest.read_text().replace(f'"namespace": "{TRITON_PKG}"', '"namespace": "cake_test_modified"'))
    monkeypatch.setenv("CAKE_EXPORT_ALLOW_MODIFIED", "1")
    with pytest.warns(UserWarning, match=r"registering modified code .*manifest\.json: sha256"):
        _load_as("cake_test_modified", copy)
    x, c = _kmeans_inputs()
    assert torch.ops.cake_test_modified.kmeans_assign(x, c).shape == (2, 97)


def test_plugin_registration_is_reentrant(triton_pkg: ModuleType) -> None:
    plugins = importlib.import_module(f"{TRITON_PKG}._plugins")
    plugins.register()
    plugins.register()
    assert hasattr(getattr(torch.ops, TRITON_PKG), "kmeans_assign")


def test_certify_cuda_package_on_cpu_is_refused(cuda_export: Path) -> None:
    with pytest.raises(ExportError, match="run only on a GPU: certify with --device cuda"):
        certify(cuda_export, device="cpu")


def test_cli_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(tmp_path / "missing.cake"), "-o", str(tmp_path / "o")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["export", str(FK / "assign_plain.cake"), "-o", str(tmp_path / "o"), "--static", "D"]) == 2
    assert main(["certify", str(tmp_path)]) == 2
    assert "not an exported package" in capsys.readouterr().err


def _fake_module(spec: dict[str, Any]) -> Any:
    return type("M", (), {"functions": {c["kname"]: 1000 + i for i, c in enumerate(spec["codes"])}})


def test_cuda_call_packs_and_launches_with_a_fake_driver(cuda_pkg: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CUDA host path on the CPU with the driver replaced: grids, argument blocks (pointers refreshed per call,
    strides and dims written once), tensor maps cached per pointer, torch's stream."""
    kernels, cuda = cuda_pkg._kernels, cuda_pkg._cuda
    launched: list[tuple[Any, ...]] = []
    encoded: list[int] = []

    def fake_encode(tmap: Any, ptr: int, shape: Any, strides: Any, esize: int) -> bytes:
        encoded.append(ptr)
        return struct.pack("<Q", ptr) + bytes(120)

    monkeypatch.setattr(cuda, "encode_tensor_map_at", fake_encode)
    monkeypatch.setattr(cuda, "current_stream", lambda index: 77)
    monkeypatch.setattr(cuda, "memset", lambda *args: 0)
    blocks = {}

    def fake_launch(function: int, *rest: Any) -> int:
        launched.append((function, *rest[:4], bytes(blocks[function])))
        return 0

    monkeypatch.setattr(cuda, "launch", fake_launch)
    monkeypatch.setattr(cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: type("P", (), {"multi_processor_count": 132}))
    variant = cuda_pkg.PACKAGE.ops["kmeans_assign"].buckets[0][2][0]
    spec = variant.specs["T=bf16;D=64"]
    module = _fake_module(spec)
    dims = {"B": 2, "N": 300, "K": 130, "D": 64}
    x, c = _kmeans_inputs(torch.bfloat16, n=300, k=130, d=64)
    call = kernels.CudaCall(variant, spec, module, dims, {"T": "bf16"}, torch.device("cpu"), [x.shape, c.shape])
    blocks.update({launch.function: launch.block for launch in call.launches})
    ids = call(x, c)
    assert ids.shape == (2, 300) and ids.dtype == torch.int32
    norms, assign = launched
    assert norms[:5] == (1000, (3, 2, 1), 128, spec["codes"][0]["smem_bytes"], 77)  # cdiv(K, 64) x B
    assert assign[:5] == (1001, (4, 1, 1), 384, spec["codes"][1]["smem_bytes"], 77)  # persistent: min(tiles, SMs)
    fields = {f["name"]: f for f in spec["codes"][1]["args"]}

    def field(block: bytes, name: str) -> int:
        f = fields[name]
        return int(struct.unpack_from({"ptr": "<Q", "stride": "<q", "dim": "<i", "tmap": "<Q"}[f["kind"]], block,
                                      f["offset"])[0])

    tmap_x = next(n for n, f in fields.items() if f["kind"] == "tmap" and f["tensor"] == "x")
    ptr_x = next(n for n, f in fields.items() if f["kind"] == "ptr" and f["tensor"] == "x")
    dim_k = next(n for n, f in fields.items() if f["kind"] == "dim" and f["tensor"] == "K")
    stride_x0 = next(n for n, f in fields.items() if f["kind"] == "stride" and f["tensor"] == "x" and f["axis"] == 0)
    assert field(assign[5], ptr_x) == field(assign[5], tmap_x) == x.data_ptr()
    assert field(assign[5], dim_k) == 130 and field(assign[5], stride_x0) == 300 * 64
    assert call.fast  # contiguous, TMA-addressable inputs: every later call takes the fast path
    x2 = x.clone()
    call(x2, c)
    assert field(launched[-1][5], ptr_x) == field(launched[-1][5], tmap_x) == x2.data_ptr()
    assert field(launched[-1][5], stride_x0) == 300 * 64
    call(x, c)  # the first pointer again: its tensor map comes from the cache
    assert encoded.count(x.data_ptr()) == 1 and encoded.count(x2.data_ptr()) == 1
    # A view at an odd offset cannot be a TMA base: the fast path hands it to the prepared path (aligned copy).
    odd = torch.empty(2 * 300 * 64 + 1, dtype=torch.bfloat16)[1:].view(2, 300, 64)
    odd.copy_(x)
    call(odd, c)
    assert field(launched[-1][5], ptr_x) not in (odd.data_ptr(), 0)
    assert field(launched[-1][5], ptr_x) % 16 == 0
    # A layout the kernel does not take is copied to a contiguous tensor first (documented), never misread.
    strided = x.transpose(1, 2).contiguous().transpose(1, 2)
    monkeypatch.setattr(variant, "module", lambda spec, device: (module, "sm_90a"))
    strided_call = variant.route((strided, c), "bf16")
    blocks.update({launch.function: launch.block for launch in strided_call.launches})
    assert strided_call.copy == (True, False)
    strided_call(strided, c)
    assert not strided_call.fast
    assert field(launched[-1][5], ptr_x) not in (strided.data_ptr(), 0)
    assert field(launched[-1][5], stride_x0) == 300 * 64


@pytest.mark.parametrize(("k", "memsets", "cooperative"), [
    (128, 0, ()),  # the norms launch overwrites csq_g [B, K] whole before the assign reads it, no padding: no memset
    (130, 1, ()),  # K=130 f32 rows padded to 132 (16 bytes): the padding is never written, so it is zeroed
    (128, 0, ("assign",)),  # a cooperative code (a fused kernel's): cuLaunchKernelEx, the plain one cuLaunchKernel
    (130, 1, ("centroid_norms", "assign")),
])
def test_cuda_fast_path_per_call_work_is_bounded(cuda_pkg: ModuleType, fake_driver: Any,
                                                 monkeypatch: pytest.MonkeyPatch, k: int, memsets: int,
                                                 cooperative: tuple[str, ...]) -> None:
    """Per steady-state call, counted at the ctypes boundary (scripts/bench_export_host_cpu.py's driver): one
    launch per kernel (cuLaunchKernelEx with CU_LAUNCH_ATTRIBUTE_COOPERATIVE for a cooperative code, cuLaunchKernel
    for the others), one memset for the scratch only where its init is live (no fill kernel), no tensor-map
    encoding (cached), and no torch allocation but the output and the scratch buffer."""
    driver = fake_driver
    variant = cuda_pkg.PACKAGE.ops["kmeans_assign"].buckets[0][2][0]
    spec = variant.specs["T=bf16;D=64"]
    for code in spec["codes"]:  # the session's package is shared: restored after the test
        monkeypatch.setitem(code, "cooperative", code["launch"] in cooperative)
    monkeypatch.setattr(variant, "module", lambda spec, device: (_fake_module(spec), "sm_90a"))
    x, c = _kmeans_inputs(torch.bfloat16, n=256, k=k, d=64)
    call = variant.route((x, c), "bf16")
    assert variant.meta["cuda"]["scratch"][0]["overwritten_by"] == "centroid_norms"
    # torch.empty hands out the same two buffers (a caching allocator's steady state), counted; the other
    # factories count and allocate
    out = torch.empty(1, 256, dtype=torch.int32)
    scratch = torch.empty(call.scratch[0].alloc, dtype=torch.float32)
    buffers = iter([out, scratch] * 6)
    allocations: collections.Counter[str] = collections.Counter()

    def counted(name: str, fn: Any) -> Any:
        return lambda *a, **k: (allocations.update([name]), fn(*a, **k))[1]

    monkeypatch.setattr(torch, "empty", counted("empty", lambda *a, **k: next(buffers)))
    for name in ("full", "zeros", "empty_like", "zeros_like", "full_like"):
        monkeypatch.setattr(torch, name, counted(name, getattr(torch, name)))
    call(x, c)
    driver.calls.clear()
    driver.launches.clear()
    driver.attributes.clear()
    allocations.clear()
    for _ in range(5):
        call(x, c)
    plain = len(spec["codes"]) - len(cooperative)
    expected = ({"cuLaunchKernel": 5 * plain} if plain else {}) | \
        ({"cuLaunchKernelEx": 5 * len(cooperative)} if cooperative else {}) | \
        ({"cuMemsetD32Async": 5 * memsets} if memsets else {})
    assert dict(driver.calls) == expected
    assert [launch.cooperative for launch in call.launches] == [c["launch"] in cooperative for c in spec["codes"]]
    # what the driver reads at the config's address: the call's grid, block, smem and stream, and the one attribute
    # CU_LAUNCH_ATTRIBUTE_COOPERATIVE (2) = 1
    assert driver.attributes == [[(2, 1)]] * (5 * len(cooperative))
    grids = {launch.function: (launch.grid, launch.threads, launch.smem) for launch in call.launches}
    assert all(row[1:4] == grids[row[0]] and row[4] == 77 for row in driver.launches)
    assert dict(allocations) == {"empty": 5 * 2}  # ids and the scratch; no full/zeros: no fill kernel
    csq = call.scratch[0]
    assert csq.initialize == bool(memsets)
    if memsets:
        assert driver.memsets[-1] == ("cuMemsetD32Async", scratch.data_ptr(), 0, csq.count, 77)
        assert csq.count == scratch.numel()  # the whole allocation, padding included, is zeroed
    plan = call.plan_values()  # the C++ launcher's plan says the same: memset width 0 for a buffer not set
    assert plan is not None
    width_at = 9 + len(csq.alloc)  # format; output count, dtype, rank, 2 dims; scratch count, dtype, rank, dims
    assert plan[width_at] == (4 if memsets else 0)


@pytest.mark.parametrize(("dtype", "init", "memset", "bits", "per_element"), [
    (torch.float32, 0.0, "cuMemsetD32Async", 0, 1),
    (torch.float32, float("inf"), "cuMemsetD32Async", 0x7F800000, 1),
    (torch.bfloat16, float("-inf"), "cuMemsetD16Async", 0xFF80, 1),
    (torch.float16, 1.0, "cuMemsetD16Async", 0x3C00, 1),
    (torch.bool, 1.0, "cuMemsetD8Async", 1, 1),
    (torch.int64, -1.0, "cuMemsetD32Async", 0xFFFFFFFF, 2),  # an 8-byte pattern of two equal words
    (torch.int64, 1.0, None, 1, 2),  # unequal words: no driver memset takes it; `fill_` sets it
])
def test_scratch_init_is_one_driver_memset(cuda_pkg: ModuleType, dtype: torch.dtype, init: float, memset: str | None,
                                           bits: int, per_element: int) -> None:
    plan = cuda_pkg._kernels.ScratchPlan("s", (3, 5), None, dtype, init)
    assert (plan.memset, plan.bits) == (memset, bits)
    assert plan.count == 3 * plan.alloc[-1] * per_element and plan.alloc[-1] * dtype.itemsize % 16 == 0


def test_certify_reports_ptxas_resources_for_the_device(cuda_export: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cake.export.certify import worst_resources

    manifest = json.loads((cuda_export / CUDA_PKG / "manifest.json").read_text())
    assert worst_resources(manifest, "kmeans_assign", "cpu") is None
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    report = worst_resources(manifest, "kmeans_assign", "cuda")
    assert report is not None and report["arch"] == "sm_90a"
    assert 0 < report["registers_per_thread"] <= 255 and report["smem_bytes"] > 48 * 1024  # the ping-pong's stages
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (10, 0))
    assert worst_resources(manifest, "kmeans_assign", "cuda") is None  # no cubin for sm_100


def test_a_choice_table_exports_each_configuration_first_where_it_routes(tmp_path: Path) -> None:
    from cake.export import from_choice_table

    table = tmp_path / "update_buckets.json"
    table.write_text(json.dumps({"op": "kmeans_update", "rule": "points_per_cluster", "buckets": [
        {"name": "small", "at_least": 0, "schedule": "update_ranked.cake", "params": {}},
        {"name": "large", "at_least": 512, "schedule": "update_ranked.cake", "params": {"BC": 64, "RWARPS": 4}}]}))
    small, large = from_choice_table(table)
    assert "param BC = 64" in large.text and "param RWARPS = 4" in large.text and "param BC = 32" in small.text
    # large_n (1024 points per cluster) and k128 (512) reach the large bucket; the rest of the declared shapes not.
    assert large.serves == ("large_n", "k128") and small.serves == ("cake_cell", "fk_fp16", "d64")
    out = tmp_path / "pkg"
    export_package([small, large], out, name="cake_test_export_choice")
    manifest = json.loads((out / "cake_test_export_choice" / "manifest.json").read_text())
    first = {b["name"]: b["variants"][0] for b in manifest["ops"]["kmeans_update"]["buckets"]}
    assert first == {"cake_cell": "v0", "fk_fp16": "v0", "large_n": "v1", "d64": "v0", "k128": "v1"}
    certificate = json.loads((out / "cake_test_export_choice" / "certificate.json").read_text())
    assert certificate["variants"]["v1"]["serves"] == ["large_n", "k128"]


def test_export_refuses_a_json_that_is_not_a_choice_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "t.json"
    bad.write_text(json.dumps({"rule": "points_per_cluster"}))
    assert main(["export", str(bad), "-o", str(tmp_path / "out")]) != 0
    assert 'a choice table names its op ("op": "kmeans_update")' in capsys.readouterr().err
