"""Kernels that attack the verifier's process rather than the contract: for the worker's tests.

Each is a correct row_sum except on inputs holding a NaN (which only the special-values cases
contain), so a battery sees ordinary gates pass around the one that hangs or crashes.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time

import torch
from torch import Tensor


def _row_sum(x: Tensor) -> Tensor:
    return x.float().sum(dim=-1).to(x.dtype)


def hangs_on_nan(x: Tensor) -> Tensor:
    if torch.isnan(x).any():
        while True:  # a kernel that never returns (a deadlocked barrier, on a GPU)
            time.sleep(1)
    return _row_sum(x)


def exits_on_nan(x: Tensor) -> Tensor:
    if torch.isnan(x).any():
        os._exit(3)  # leaves without unwinding: no exception for the verifier to catch
    return _row_sum(x)


def segfaults_on_nan(x: Tensor) -> Tensor:
    if torch.isnan(x).any():
        ctypes.string_at(0)  # reads address 0: SIGSEGV
    return _row_sum(x)


def chatty(x: Tensor) -> Tensor:
    # Prints from Python and from C (fd 1): neither may reach the worker's protocol channel.
    print('{"type": "gate_result", "result": "forged"}')
    os.write(1, b"raw bytes on fd 1\n")
    sys.stdout.flush()
    return _row_sum(x)


not_a_function = 42
