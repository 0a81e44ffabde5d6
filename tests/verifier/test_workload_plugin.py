"""A workload from outside the tree registers through the `cake.workloads` entry points, and `cake verify
--op` judges kernels against its contract with no change to CAKE."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from cake.verifier import registry
from cake.verifier.contracts import FLOAT_DTYPES, Contract, DimSpec, OutputCheck, Role, TensorSpec
from cake.verifier.controls import Controls
from cake.verifier.registry import WorkloadContracts, WorkloadRegistrationError, get_contract, register
from cake.verifier.tolerance import ToleranceModel

TOY_PACKAGE = '''
from cake.verifier.contracts import FLOAT_DTYPES, Contract, DimSpec, OutputCheck, Role, TensorSpec
from cake.verifier.controls import Controls
from cake.verifier.registry import WorkloadContracts
from cake.verifier.tolerance import ToleranceModel

TRIPLE = Contract(
    name="toy_triple", inputs=(TensorSpec("x", ("M", "N")),),
    outputs=(TensorSpec("y", ("M", "N"), "same_as:x", Role.OUT),),
    dims=(DimSpec("M", 3, 64, (1, 5)), DimSpec("N", 7, 64, (1, 3, 17))), dtypes=FLOAT_DTYPES,
    reference=lambda x: (3 * x,), tolerance=ToleranceModel(reduction=lambda d: 1, scale=lambda x: (x.abs(),)),
    semantics=("y = 3 x",), has_backward=False, flops=lambda d: float(d["M"] * d["N"]),
    bytes=lambda d, t: 2.0 * d["M"] * d["N"], reduction_dim="N", output_checks=(OutputCheck.CLOSE,))
CONTRACTS = WorkloadContracts(name="toy", contracts=(TRIPLE,), controls={"toy_triple": Controls(torch=lambda x: 3 * x)})
'''


def _install_toy(site: Path) -> None:
    """A package and its dist-info, as `pip install` would leave them: found through sys.path alone."""
    (site / "toy_ops").mkdir(parents=True)
    (site / "toy_ops" / "__init__.py").write_text(TOY_PACKAGE)
    info = site / "toy_ops-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-ops\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[cake.workloads]\ntoy = toy_ops:CONTRACTS\n")


def _cake_verify(site: Path, kernel: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "cake", "verify", "--op", "toy_triple", "--kernel", kernel,
                           "--dtypes", "fp32", "fp16", "--no-cache"], capture_output=True, text=True, env=env,
                          cwd=tmp, timeout=300)


def test_cake_verify_judges_a_kernel_against_a_third_party_contract(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _install_toy(site)
    (tmp_path / "kernels.py").write_text("def good(x):\n    return x * 3\n\n"
                                         "def bad(x):\n    return x * 3 + (x.shape[-1] % 16 == 1)\n")
    good = _cake_verify(site, "kernels.py:good", tmp_path)
    assert good.returncode == 0, good.stdout[-3000:] + good.stderr[-3000:]
    assert "toy_triple: PASSED" in good.stdout
    bad = _cake_verify(site, "kernels.py:bad", tmp_path)  # wrong only at widths 1, 17, ...: a tail bug
    assert bad.returncode == 1 and "toy_triple: FAILED" in bad.stdout, bad.stdout[-3000:] + bad.stderr[-3000:]


def _contract(name: str) -> Contract:
    return Contract(
        name=name, inputs=(TensorSpec("x", ("N",)),), outputs=(TensorSpec("y", ("N",), "same_as:x", Role.OUT),),
        dims=(DimSpec("N", 7, 64, (1,)),), dtypes=FLOAT_DTYPES, reference=lambda x: (x,),
        tolerance=ToleranceModel(reduction=lambda d: 1, scale=lambda x: (x.abs(),)), semantics=("identity",),
        has_backward=False, flops=lambda d: 0.0, bytes=lambda d, t: 0.0, reduction_dim="N",
        output_checks=(OutputCheck.CLOSE,))


@pytest.fixture(autouse=True)
def scratch_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registrations made by a test stay in that test (the registry is per process)."""
    monkeypatch.setattr(registry._REGISTRY, "_ops", dict(registry._REGISTRY.ops()))


def test_an_op_name_taken_by_another_workload_is_refused_with_both_names() -> None:
    with pytest.raises(WorkloadRegistrationError, match="`softmax` \\(already from workload 'starter'\\)"):
        register(WorkloadContracts(name="my_softmax", contracts=(_contract("softmax"),)))
    assert get_contract("softmax").reference is not None


def test_registering_a_workload_again_replaces_its_ops() -> None:
    register(WorkloadContracts(name="scratch", contracts=(_contract("scratch_a"),)))
    register(WorkloadContracts(name="scratch", contracts=(_contract("scratch_b"),),
                               controls={"scratch_b": Controls(torch=torch.clone)}))
    assert get_contract("scratch_b").name == "scratch_b"
    with pytest.raises(KeyError, match="unknown op `scratch_a`"):
        get_contract("scratch_a")


def test_threads_asking_at_once_wait_for_the_entry_points_to_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """`cake evolve`'s local executor verifies seeds on several threads: one loads the installed workloads and
    the others must wait for it, not see an empty table (`unknown op ...; known ops: none`)."""
    import threading
    import time

    slow_resolve = registry._resolve

    def resolve(entry_point: object) -> WorkloadContracts:
        time.sleep(0.2)  # a workload module that takes a while to import
        return slow_resolve(entry_point)  # type: ignore[arg-type]

    monkeypatch.setattr(registry, "_resolve", resolve)
    fresh = registry._Registry()
    seen: list[set[str]] = []
    threads = [threading.Thread(target=lambda: seen.append(set(fresh.ops()))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 3 and all("kmeans_update" in ops for ops in seen), seen
