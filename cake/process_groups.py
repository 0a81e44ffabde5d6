"""Child processes started in sessions of their own (`start_new_session=True`): a worker and whatever it starts
(a kernel's helper processes, a verifier worker) form one process group, which ends as one."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from typing import Any

END_OF_INPUT_WAIT_S = 5.0  # how long a worker told to finish (its stdin closed) may take before it is killed
PARENT_POLL_S = 1.0  # how often a worker checks that the process that started it is still there


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


def exit_with_parent(parent: int | None = None, poll_s: float = PARENT_POLL_S) -> None:
    """In a worker that leads its own session: kill this whole group once `parent` (default: the process that
    started this one) is gone, even in the middle of a request. The parent's own group kill (a run killed at its time
    limit) does not reach a session of its own, and a hung kernel would otherwise hold the GPU with nobody left to
    time it out; end of input is noticed only between requests."""
    watched = os.getppid() if parent is None else parent

    def watch() -> None:
        while os.getppid() == watched:
            time.sleep(poll_s)
        if os.getpgid(0) == os.getpid():  # this process leads its group: the group is its own to end
            os.killpg(os.getpgid(0), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="cake-exit-with-parent", daemon=True).start()
