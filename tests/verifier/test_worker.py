"""The isolating worker: hangs become TIMEOUT, crashes become RUNTIME_ERROR, and the battery goes on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cake.verifier.results import GateStatus
from cake.verifier.verdict_cache import VerdictCache
from cake.verifier.worker import KernelLoadError, WorkerSession, verify_dtypes_in_worker, verify_in_worker
from cake.verifier.worker_protocol import KernelRef, KernelRefError

CORPUS = Path(__file__).resolve().parent / "corpus"
# CMP-01 holds no NaN; EXC-01 plants NaN; CMP-03 (no NaN in the logical values) runs after it.
GATES = ("CMP-01", "EXC-01", "CMP-03")
TIMEOUT_S = 20.0  # generous: a fresh worker imports torch, and CI runs two test processes at once


def ref(func: str, file: str = "misbehaving.py") -> KernelRef:
    return KernelRef.parse(f"{CORPUS / file}:{func}")


def run(func: str, timeout_s: float = TIMEOUT_S, **kwargs: object):
    return verify_in_worker("row_sum", ref(func), device="cpu", dtypes=("float32",), seed=0, all_gates=True,
                            timeout_s=timeout_s, gates=GATES, use_cache=False, **kwargs)  # type: ignore[arg-type]


def statuses(verdict) -> dict[str, GateStatus]:
    return {g.gate_id: g.status for g in verdict.gates}


def test_hang_is_timeout_and_later_gates_still_run() -> None:
    verdict = run("hangs_on_nan", timeout_s=8.0)
    assert statuses(verdict) == {"CMP-01": GateStatus.PASS, "EXC-01": GateStatus.TIMEOUT, "CMP-03": GateStatus.PASS}
    assert not verdict.passed
    assert "killed" in verdict.gate("EXC-01").reason


@pytest.mark.parametrize("func, signal_or_status", [("exits_on_nan", "status 3"), ("segfaults_on_nan", "SIGSEGV")])
def test_crash_is_runtime_error_and_parent_continues(func: str, signal_or_status: str) -> None:
    verdict = run(func)
    assert statuses(verdict) == {"CMP-01": GateStatus.PASS, "EXC-01": GateStatus.RUNTIME_ERROR,
                                 "CMP-03": GateStatus.PASS}
    assert signal_or_status in verdict.gate("EXC-01").reason


def test_kernel_prints_cannot_forge_protocol() -> None:
    verdict = run("chatty")
    assert verdict.passed, verdict.to_json()


def test_early_stop_after_first_failure() -> None:
    verdict = verify_in_worker("row_sum", ref("hangs_on_nan"), device="cpu", dtypes=("float32",), seed=0,
                               all_gates=False, timeout_s=8.0, gates=GATES, use_cache=False)
    assert statuses(verdict) == {"CMP-01": GateStatus.PASS, "EXC-01": GateStatus.TIMEOUT, "CMP-03": GateStatus.SKIP}
    assert verdict.gate("CMP-03").reason.startswith("not run: EXC-01 failed")


@pytest.mark.parametrize("file, func, message", [
    ("misbehaving.py", "no_such_function", "no attribute"),
    ("misbehaving.py", "not_a_function", "not callable"),
    ("broken_import.py", "kernel", "fails at import time"),
])
def test_unloadable_kernel_is_a_load_error(file: str, func: str, message: str) -> None:
    with pytest.raises(KernelLoadError, match=message):
        verify_in_worker("row_sum", ref(func, file), device="cpu", dtypes=("float32",), seed=0, all_gates=True,
                         timeout_s=TIMEOUT_S, gates=GATES[:1], use_cache=False)


def test_loader_reference_that_does_not_import_is_a_load_error(tmp_path: Path) -> None:
    loader = KernelRef.loader("cake.no_such_module:load", str(tmp_path / "x.cake"))
    with pytest.raises(KernelLoadError, match="not importable"):
        verify_in_worker("row_sum", loader, device="cpu", dtypes=("float32",), seed=0, all_gates=True,
                         timeout_s=TIMEOUT_S, gates=GATES[:1], use_cache=False)


def test_bad_references_are_rejected_before_any_process(tmp_path: Path) -> None:
    for text in ("no_colon.py", f"{tmp_path}/missing.py:f", f"{CORPUS / 'controls.py'}:not-ident", "x.txt:f"):
        with pytest.raises(KernelRefError):
            KernelRef.parse(text)


def test_verdicts_are_cached_and_keyed_on_source(tmp_path: Path) -> None:
    kernel = tmp_path / "k.py"
    kernel.write_text("def k(x):\n    return x.float().sum(-1).to(x.dtype)\n")
    cache = VerdictCache(tmp_path / "cache")
    args = dict(device="cpu", dtypes=("float32",), seed=0, all_gates=True, timeout_s=TIMEOUT_S,
                gates=("CMP-01",), cache=cache)
    first = verify_in_worker("row_sum", KernelRef.parse(f"{kernel}:k"), **args)  # type: ignore[arg-type]
    entries = list((tmp_path / "cache").rglob("*.json"))
    assert first.passed and len(entries) == 1
    # A hit returns the stored verdict without starting a worker: poison the entry to prove it was read.
    data = json.loads(entries[0].read_text())
    data["gates"][0]["reason"] = "from the cache"
    entries[0].write_text(json.dumps(data))
    assert verify_in_worker("row_sum", KernelRef.parse(f"{kernel}:k"), **args).gates[0].reason == "from the cache"  # type: ignore[arg-type]
    # Editing the kernel changes its source hash: a miss, a fresh verdict, a second entry.
    kernel.write_text("def k(x):\n    return x.sum(-1) * 0\n")
    second = verify_in_worker("row_sum", KernelRef.parse(f"{kernel}:k"), **args)  # type: ignore[arg-type]
    assert not second.passed and len(list((tmp_path / "cache").rglob("*.json"))) == 2


def test_several_dtypes_share_one_worker_cache_per_dtype_and_stop_at_the_first_failure(tmp_path: Path) -> None:
    kernel = tmp_path / "k.py"
    kernel.write_text("import torch\n"
                      "def k(x):\n"
                      "    y = x.float().sum(-1).to(x.dtype)\n"
                      "    return y + 1 if x.dtype == torch.float16 else y\n")
    cache = VerdictCache(tmp_path / "cache")
    ref16 = KernelRef.parse(f"{kernel}:k")
    args = dict(device="cpu", seed=0, all_gates=False, timeout_s=TIMEOUT_S, gates=("CMP-01",), cache=cache)
    verdicts = verify_dtypes_in_worker("row_sum", ref16, dtypes=("float32", "float16", "bfloat16"),
                                       **args)  # type: ignore[arg-type]
    assert [(d, v.passed) for d, v in verdicts] == [("float32", True), ("float16", False)]  # bf16 never ran
    # Each dtype's verdict sits under the single-dtype key: verify_in_worker finds both without a worker.
    for dtype, verdict in verdicts:
        again = verify_in_worker("row_sum", ref16, dtypes=(dtype,), **args)  # type: ignore[arg-type]
        assert again == verdict
    assert len(list((tmp_path / "cache").rglob("*.json"))) == 2


def test_a_worker_started_ahead_serves_the_battery_or_is_ended_unused(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # The bench spawns the verifier worker before its own setup so the two process starts overlap; the verification
    # owns it: it is the session's first worker (no other is spawned), or, when the cache answers every dtype, it is
    # ended unused.
    from cake.verifier import worker as worker_module
    from cake.verifier.worker import Worker

    kernel = tmp_path / "k.py"
    kernel.write_text("def k(x):\n    return x.float().sum(-1).to(x.dtype)\n")
    k = KernelRef.parse(f"{kernel}:k")
    args = dict(device="cpu", seed=0, all_gates=False, timeout_s=TIMEOUT_S, gates=("CMP-01",),
                cache=VerdictCache(tmp_path / "cache"))
    first, spare, wrong = Worker(k, "cpu"), Worker(k, "cpu"), Worker(k, "cpu")
    spawned: list[object] = []
    real_init = worker_module.Worker.__init__

    def counting_init(self: Worker, *a: object, **kw: object) -> None:
        spawned.append(a)
        real_init(self, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(worker_module.Worker, "__init__", counting_init)
    verdicts = verify_dtypes_in_worker("row_sum", k, dtypes=("float32",), started=first, **args)  # type: ignore[arg-type]
    assert [(d, v.passed) for d, v in verdicts] == [("float32", True)]
    assert spawned == [] and first._proc.poll() is not None  # it served, then closed with the session
    again = verify_dtypes_in_worker("row_sum", k, dtypes=("float32",), started=spare, **args)  # type: ignore[arg-type]
    assert again == verdicts and spare._proc.poll() is not None  # cached: ended without loading anything
    with pytest.raises(ValueError, match="cannot serve"):
        WorkerSession(ref("hangs_on_nan"), "cpu", TIMEOUT_S, started=wrong)
    wrong.abandon()


def test_a_spare_started_before_its_kernel_was_known_serves_the_kernel_it_is_bound_to(tmp_path: Path) -> None:
    # A bench server starts the next evaluation's verifier worker before it knows the kernel: the process learns its
    # kernel at LOAD, so the spare is bound then, and only once.
    from cake.verifier.worker import Worker

    kernel = tmp_path / "k.py"
    kernel.write_text("def k(x):\n    return x.float().sum(-1).to(x.dtype)\n")
    k = KernelRef.parse(f"{kernel}:k")
    spare = Worker(None, "cpu")
    with pytest.raises(ValueError, match="bound to one"):
        spare.load()
    verdicts = verify_dtypes_in_worker("row_sum", k, device="cpu", dtypes=("float32",), seed=0, all_gates=False,
                                       timeout_s=TIMEOUT_S, gates=("CMP-01",), cache=VerdictCache(tmp_path / "cache"),
                                       started=spare.bind(k))
    assert [(d, v.passed) for d, v in verdicts] == [("float32", True)]
    with pytest.raises(ValueError, match="cannot serve"):
        spare.bind(ref("hangs_on_nan"))


def test_a_busy_worker_ends_with_the_process_that_started_it(tmp_path: Path) -> None:
    # End of input reaches a worker only between requests: one stuck in a request (here, a kernel module that never
    # finishes importing) ends because it watches its parent, so a killed bench or evaluator leaves no GPU holder.
    import os
    import subprocess
    import sys
    import time

    kernel = tmp_path / "stuck.py"
    kernel.write_text("import time\ntime.sleep(3600)\ndef k(x):\n    return x\n")
    client = tmp_path / "client.py"
    client.write_text(
        "import sys\n"
        "from cake.verifier.worker import Worker\n"
        "from cake.verifier.worker_protocol import KernelRef\n"
        f"worker = Worker(KernelRef.parse({str(kernel) + ':k'!r}), 'cpu')\n"
        "print(worker.pid, flush=True)\n"
        "worker.load(timeout_s=3600)\n")
    proc = subprocess.Popen([sys.executable, str(client)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    pid = int(proc.stdout.readline())
    time.sleep(2.0)  # the worker is inside LOAD by now
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    pytest.fail(f"worker {pid} outlived the process that started it")


def test_spare_workers_hand_over_the_one_started_ahead_and_start_the_next(tmp_path: Path) -> None:
    from cake.verifier.worker import SpareWorkers

    kernel = tmp_path / "k.py"
    kernel.write_text("def k(x):\n    return x.float().sum(-1).to(x.dtype)\n")
    k = KernelRef.parse(f"{kernel}:k")
    spares = SpareWorkers()
    args = dict(device="cpu", dtypes=("float32",), seed=0, all_gates=False, timeout_s=TIMEOUT_S, gates=("CMP-01",),
                cache=VerdictCache(tmp_path / "cache"), spares=spares)
    try:
        verdict = verify_in_worker("row_sum", k, **args)  # type: ignore[arg-type]
        assert verdict.passed
        ready = spares._ready["cpu"]  # taking one started the next
        assert ready.alive() and ready.kernel_ref is None
        again = verify_in_worker("row_sum", k, **args)  # type: ignore[arg-type]
        assert again == verdict and spares._ready["cpu"] is ready  # the cache answered: nothing taken
        other = tmp_path / "other.py"
        other.write_text("def k(x):\n    return x.float().sum(-1).to(x.dtype) + 0\n")
        third = verify_in_worker("row_sum", KernelRef.parse(f"{other}:k"), **args)  # type: ignore[arg-type]
        assert third.passed and not ready.alive() and spares._ready["cpu"] is not ready  # the ready one served
    finally:
        spares.close()
    assert spares._ready == {}
