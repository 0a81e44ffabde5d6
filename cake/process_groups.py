"""Child processes started in sessions of their own (`start_new_session=True`): a worker and whatever it starts
(a kernel's helper processes, a verifier worker) form one process group, which ends as one."""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any

END_OF_INPUT_WAIT_S = 5.0  # how long a worker told to finish (its stdin closed) may take before it is killed


def kill_group(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL `proc`'s whole group (a group that already exited is fine); does not reap `proc`."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the whole group has already exited


def end_group(proc: subprocess.Popen[Any]) -> None:
    """Kill `proc`'s group and reap `proc`."""
    kill_group(proc)
    proc.wait()


def close_group(proc: subprocess.Popen[Any], wait_s: float = END_OF_INPUT_WAIT_S) -> None:
    """Ask `proc` to finish (end of its input), give it `wait_s` seconds, then make sure its whole group is gone."""
    if proc.poll() is None and proc.stdin is not None:
        try:
            proc.stdin.close()
            proc.wait(timeout=wait_s)
        except (BrokenPipeError, subprocess.TimeoutExpired):
            pass  # killed below either way
    end_group(proc)
