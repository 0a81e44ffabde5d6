"""The bench server (`cake.evaluation.bench_server`): one process serves evaluation after evaluation, starts the
next one's verifier worker between them, and is replaced after any request that was not clean, that died or that
ran out of time. A scripted service (`bench_doubles`) stands in for the GPU bench; the last test serves a real
request on this GPU-less machine."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from cake.verifier.worker_protocol import KernelRef

from cake.evaluation import bench_server
from cake.evaluation import evaluator as ev
from cake.evaluation.bench import BenchRequest, BenchSetupError, BenchTimes, bench_kernel
from cake.evaluation.bench_server import BenchServers, Ended, FreshBenchServers, Served

HERE = Path(__file__).resolve().parent
SCRIPTED = "bench_doubles:ScriptedService"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}


def _ask(servers: BenchServers | FreshBenchServers, tmp_path: Path, act: str,
         timeout_s: float = 60.0) -> tuple[Served | Ended, dict, str]:
    request, result = tmp_path / f"{act}.request.json", tmp_path / f"{act}.result.json"
    result.unlink(missing_ok=True)
    request.write_text(json.dumps({"op": act}))
    answer, tail = servers.request("cuda", _env(), request, result, timeout_s)
    return answer, json.loads(result.read_text()).get("run", {}) if result.is_file() else {}, tail


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_one_server_serves_clean_requests_and_starts_a_spare_between_them(tmp_path: Path) -> None:
    servers = BenchServers(SCRIPTED)
    try:
        first, run1, tail = _ask(servers, tmp_path, "ok")
        second, run2, _ = _ask(servers, tmp_path, "ok")
        assert first == second == Served(0, reusable=True)
        assert run1["pid"] == run2["pid"]  # no process start for the second evaluation
        assert not run1["prepared"]  # a server of many imports while its first request's verifier worker starts
        assert (run1["spares"], run2["spares"]) == (0, 1)  # the next verifier worker was started after the answer
        assert f"serving ok in {run1['pid']}" in tail  # what the server printed for this request
    finally:
        servers.close_all()
    assert _gone(run1["pid"])


@pytest.mark.parametrize("act, answer", [("unclean", Served(0, reusable=False)), ("setup", Served(2, reusable=False)),
                                         ("die", Ended(9, timed_out=False))])
def test_a_request_that_was_not_clean_ends_its_server_and_the_next_starts_fresh(
        tmp_path: Path, act: str, answer: Served | Ended) -> None:
    servers = BenchServers(SCRIPTED)
    try:
        _, before, _ = _ask(servers, tmp_path, "ok")
        got, _, _ = _ask(servers, tmp_path, act)
        assert got == answer
        assert _gone(before["pid"])  # retired with its whole group: a context the candidate may have poisoned
        _, after, _ = _ask(servers, tmp_path, "ok")
        assert after["pid"] != before["pid"] and after["spares"] == 0
    finally:
        servers.close_all()


def test_a_hung_request_is_killed_at_its_time_limit(tmp_path: Path) -> None:
    servers = BenchServers(SCRIPTED)
    try:
        _, before, _ = _ask(servers, tmp_path, "ok")
        started = time.monotonic()
        got, _, _ = _ask(servers, tmp_path, "hang", timeout_s=1.0)
        assert isinstance(got, Ended) and got.timed_out and time.monotonic() - started < 10
        assert _gone(before["pid"])
    finally:
        servers.close_all()


def test_a_fresh_server_serves_one_request_and_the_next_is_already_started(tmp_path: Path) -> None:
    servers = FreshBenchServers(SCRIPTED)
    try:
        first, run1, tail = _ask(servers, tmp_path, "ok")
        assert first == Served(0, reusable=True) and f"serving ok in {run1['pid']}" in tail and run1["prepared"]
        assert _gone(run1["pid"])  # it served its one request and ended, starting nothing for a next one
        (key, ready), = servers._ready.items()
        assert key[0] == "cuda" and ready.alive()  # the next request's process, started after the answer
        second, run2, _ = _ask(servers, tmp_path, "ok")
        assert second == first and run2["pid"] == ready.pid != run1["pid"] and run2["spares"] == 0
        hung, _, _ = _ask(servers, tmp_path, "hang", timeout_s=1.0)
        assert isinstance(hung, Ended) and hung.timed_out
        died, _, _ = _ask(servers, tmp_path, "die")
        assert died == Ended(9, timed_out=False)
        after, run3, _ = _ask(servers, tmp_path, "ok")  # each failure ended only its own process
        assert after == first and run3["pid"] not in (run1["pid"], run2["pid"])
    finally:
        servers.close_all()
    assert servers._ready == {} and _gone(run3["pid"])


def test_the_evaluator_serves_a_request_fresh_or_shared_never_both() -> None:
    with pytest.raises(ValueError, match="not both"):
        ev.run_bench_worker(_request("ok"), "cuda", timeout_s=1, reuse=True, started_ahead=True)


def _request(op: str) -> BenchRequest:
    return BenchRequest(op, KernelRef.parse(str(HERE / "bench_doubles.py") + ":ScriptedService"), ())


def test_the_evaluator_reads_a_server_answer_as_it_reads_a_one_shot_worker(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    servers = BenchServers(SCRIPTED)
    monkeypatch.setattr(bench_server, "_SERVERS", servers)
    monkeypatch.setenv("PYTHONPATH", _env()["PYTHONPATH"])
    try:
        keep = tmp_path / "abc.bench.json"
        times, _ = ev.run_bench_worker(_request("ok"), "cuda", timeout_s=60, keep=keep, reuse=True)
        assert times == BenchTimes({"cell": 1.0}, {"b": {"cell": 2.0}})
        assert json.loads(keep.read_text())["spares"] == 0
        why, _ = ev.run_bench_worker(_request("setup"), "cuda", timeout_s=60, reuse=True)
        assert why == "no CUDA device here"
        died, problem = ev.run_bench_worker(_request("die"), "cuda", timeout_s=60, reuse=True)
        assert died is None and "exited 9" in problem
        hung, problem = ev.run_bench_worker(_request("hang"), "cuda", timeout_s=1, reuse=True)
        assert hung is None and "timed out after 1 s" in problem
    finally:
        servers.close_all()


def test_the_real_service_answers_a_setup_error_here_and_retires(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # No GPU on this machine: the real bench refuses to start, says why, and its server does not serve again.
    servers = BenchServers()
    monkeypatch.setattr(bench_server, "_SERVERS", servers)
    try:
        why, _ = ev.run_bench_worker(_request("kmeans_assign"), "cuda", timeout_s=120, reuse=True)
        assert isinstance(why, str) and "no CUDA device here" in why
        assert servers._servers == {}
    finally:
        servers.close_all()


def test_a_spare_that_cannot_be_used_is_ended_with_the_bench(tmp_path: Path) -> None:
    from cake.verifier.worker import Worker

    spare = Worker(None, "cuda")
    with pytest.raises(BenchSetupError, match="no CUDA device here"):
        bench_kernel(_request("kmeans_assign"), spare=spare)
    assert spare._proc.poll() is not None and spare.kernel_ref == _request("kmeans_assign").kernel


def test_a_server_whose_client_is_gone_ends_even_in_the_middle_of_a_request(tmp_path: Path) -> None:
    # The client's own process group does not reach a server in a session of its own (a run killed at its time
    # limit): the server watches its client and ends its group when the client is gone.
    import subprocess
    import sys

    script = tmp_path / "client.py"
    script.write_text(
        "import json, sys, time\n"
        "from pathlib import Path\n"
        "from cake.evaluation.bench_server import BenchServer\n"
        f"server = BenchServer(dict(__import__('os').environ), {SCRIPTED!r})\n"
        "print(server.pid, flush=True)\n"
        f"request = Path({str(tmp_path / 'r.json')!r}); request.write_text(json.dumps({{'op': 'hang'}}))\n"
        f"server.request(request, Path({str(tmp_path / 'out.json')!r}), 3600)\n")
    client = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=_env())
    assert client.stdout is not None
    pid = int(client.stdout.readline())
    time.sleep(1.0)
    client.kill()
    client.wait()
    assert _gone(pid)


class _Holding:
    """An evaluator that keeps processes between evaluations (as `ScheduleEvaluator` keeps bench servers)."""

    def __init__(self) -> None:
        self.closed = 0

    def evaluate(self, job: object, device: str) -> object:
        raise AssertionError("not evaluated here")

    def close(self) -> None:
        self.closed += 1


def test_closing_an_executor_ends_the_processes_its_evaluator_keeps() -> None:
    from cake.evaluation.executors import InProcessExecutor, LocalPoolExecutor

    inline, pooled = _Holding(), _Holding()
    InProcessExecutor(inline, "cuda").close()  # type: ignore[arg-type]
    LocalPoolExecutor(pooled, ["cuda:0"]).close()  # type: ignore[arg-type]
    assert (inline.closed, pooled.closed) == (1, 1)


def test_the_gpu_smoke_script_says_the_server_is_not_fit_here(tmp_path: Path) -> None:
    # scripts/gpu_bench_server_smoke.py, which the s23 GPU script runs before the seeds: on this GPU-less machine no
    # request is timed, so it reports not ok (exit 3) and the seeds would run with one-shot bench processes.
    import subprocess
    import sys

    script = HERE.parents[1] / "scripts" / "gpu_bench_server_smoke.py"
    done = subprocess.run([sys.executable, str(script), "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 3, done.stderr[-2000:]
    report = json.loads((tmp_path / "bench_server_smoke.json").read_text())
    assert report["ok"] is False and [r["reuse"] for r in report["requests"]] == [False, True, True]
    assert all("no CUDA device here" in r["status"] for r in report["requests"])


def test_the_gpu_smoke_script_asks_only_for_schedules_the_cuda_backend_takes_at_the_cell(tmp_path: Path) -> None:
    # A variant the CUDA backend refuses (session 24: STAGES=5 over sm_90a's shared memory) fails its request, and the
    # smoke then blames the server. Each request's schedule must check clean against the backend at the cell's D.
    import importlib.util

    from cake.experiments.schedules import write_specialized
    from cake.ir.check import check_text
    from cake.ir.checks.registry import Backend

    from cake.diagnostics import render_all

    script = HERE.parents[1] / "scripts" / "gpu_bench_server_smoke.py"
    spec = importlib.util.spec_from_file_location("gpu_bench_server_smoke", script)
    assert spec is not None and spec.loader is not None
    smoke = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(smoke)
    for label, params, _reuse in smoke.REQUESTS:
        path = write_specialized(smoke.schedule_path("assign_pingpong.cake"), params, tmp_path)
        found = check_text(path.read_text(), path.name, arch="sm_90a", backend=Backend.CUDA, dims={"D": 128})
        assert not found, f"{label} {params}:\n{render_all(found)}"
