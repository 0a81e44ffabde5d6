"""A scripted bench service for `tests/evaluation/test_bench_server.py`: the server imports it by name
(`--service bench_doubles:ScriptedService`, with this directory on PYTHONPATH), so a server's protocol, reuse,
retirement and timeouts are tested without a GPU. The request's `op` names what the service does."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from cake.evaluation.bench_server import Served


class ScriptedService:
    def __init__(self) -> None:
        self.spares = 0  # how many times the server asked for a spare verifier worker between requests
        self.prepared = False  # whether the server prepared the service before its first request (`--once`)

    def prepare(self) -> None:
        self.prepared = True

    def serve(self, request_file: Path, result_file: Path) -> Served:
        act = json.loads(request_file.read_text())["op"]
        if act == "hang":
            time.sleep(3600)
        if act == "die":
            os._exit(9)
        print(f"serving {act} in {os.getpid()}", flush=True)
        run = {"pid": os.getpid(), "spares": self.spares, "prepared": self.prepared}
        if act == "setup":
            result_file.write_text(json.dumps({"error": "no CUDA device here"}))
            return Served(2, reusable=False)
        times = {"candidate": {"cell": 1.0}, "baselines": {"b": {"cell": 2.0}}, "problems": {}, "refused": None}
        result_file.write_text(json.dumps({"times": times, "run": run}))
        return Served(0, reusable=act == "ok")

    def start_spare(self) -> None:
        self.spares += 1

    def close(self) -> None:
        print("closed", flush=True)
