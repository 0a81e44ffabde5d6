"""The host path an exported package's CUDA ops take, and the C++ launcher (`_launcher.cpp`), the fast one.

Part of an exported package (copied verbatim by `cake export`): standard library and torch only.

`CAKE_EXPORT_HOST_PATH` chooses, per process:
- `auto` (default): the C++ launcher where torch has CUDA, a C++ compiler (`$CXX`, else `c++`/`g++`/`clang++`)
  and CUDA's `cuda.h` (`$CUDA_HOME`, `$CUDA_PATH`, beside `nvcc`, `/usr/local/cuda`) are present; otherwise
  the ctypes path, with one `HostPathWarning` saying why and how to get the fast one;
- `cpp`: the C++ launcher or an ImportError saying what is missing;
- `ctypes`: the Python path through ctypes (no compiler needed).
The choice and its reason are `<package>.host_path` and go into every `cake certify` row.

The launcher is compiled once per (source, torch, compiler) into `$CAKE_EXPORT_CACHE` (default
`~/.cache/cake_export`), written under a temporary name and renamed, so processes that build at once do not
see half a library. It links against torch's libc10, libtorch_cpu (and libc10_cuda where torch has it)
and finds libcuda at run time.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Any

import torch

HOST_PATH_ENV = "CAKE_EXPORT_HOST_PATH"
# =1: ops with integer outputs keep autograd's not-implemented fallback in front of the C++ kernel (as before
# session 6), for measuring what skipping it saves in one session
AUTOGRAD_FALLBACK_ENV = "CAKE_LAUNCHER_AUTOGRAD_FALLBACK"
CACHE_ENV = "CAKE_EXPORT_CACHE"
CHOICES = ("auto", "cpp", "ctypes")
# bump with PLAN_FORMAT, or when the library's ops change (v2: the out-variant's attach_out, workspace, check_out;
# v3: plan format 3), so that packages exported before and after share a process, each with its own library
NAMESPACE = "cake_launcher_v3"
PLAN_FORMAT = 3  # `_launcher.cpp`'s PLAN_FORMAT (3: each launch carries its cooperative flag)
# The plan format's dtype codes (`_launcher.cpp`'s scalar_type).
DTYPE_CODES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.int32: 3, torch.int64: 4,
               torch.bool: 5}
SOURCE = Path(__file__).resolve().with_name("_launcher.cpp")
BUILD_TIMEOUT_S = 600


class HostPathWarning(UserWarning):
    """The C++ launcher is not used in `auto` mode: the ops take the slower ctypes path (shown once)."""


class LauncherUnavailable(RuntimeError):
    """What is missing for the C++ launcher (compiler, cuda.h, CUDA torch) or why its build failed."""


def chosen() -> str:
    value = os.environ.get(HOST_PATH_ENV, "auto") or "auto"
    if value not in CHOICES:
        raise ImportError(f"{HOST_PATH_ENV}={value!r}: use one of {', '.join(CHOICES)}")
    return value


def bypasses_autograd() -> bool:
    return os.environ.get(AUTOGRAD_FALLBACK_ENV, "") != "1"


def compiler() -> str | None:
    named = os.environ.get("CXX")
    if named:
        return shutil.which(named)
    return next((path for name in ("c++", "g++", "clang++") if (path := shutil.which(name))), None)


def cuda_include() -> Path | None:
    """The directory holding CUDA's `cuda.h`."""
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(str(Path(nvcc).resolve().parents[1]))
    roots.append("/usr/local/cuda")
    for root in roots:
        if root and (Path(root) / "include" / "cuda.h").is_file():
            return Path(root) / "include"
    return None


def compile_command(cxx: str, include: Path, output: Path) -> list[str]:
    torch_root = Path(torch.__file__).resolve().parent
    abi = int(bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)))
    # a CUDA torch: its current stream through libc10_cuda (see current_stream in the source)
    c10_cuda = ["-lc10_cuda"] if any((torch_root / "lib").glob("libc10_cuda.*")) else []
    return [cxx, "-std=c++20", "-O2", "-fPIC", "-shared", "-w", str(SOURCE), "-o", str(output),
            f"-I{torch_root / 'include'}", f"-I{torch_root / 'include/torch/csrc/api/include'}",
            f"-I{include}", f"-D_GLIBCXX_USE_CXX11_ABI={abi}", f"-L{torch_root / 'lib'}", "-lc10", *c10_cuda,
            "-ltorch_cpu", "-ldl", f"-Wl,-rpath,{torch_root / 'lib'}"]


def build(cache: Path | None = None) -> Path:
    """The compiled launcher for this torch and compiler (built now unless cached)."""
    cxx, include = compiler(), cuda_include()
    if cxx is None:
        raise LauncherUnavailable("no C++ compiler (set $CXX or install g++)")
    if include is None:
        raise LauncherUnavailable("CUDA's cuda.h not found (set $CUDA_HOME to the toolkit)")
    cache = cache or Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "cake_export")
    cache.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(SOURCE.read_bytes())
    digest.update(" ".join([torch.__version__, cxx, str(include)]).encode())
    target = cache / f"cake_launcher_{digest.hexdigest()[:20]}.so"
    if target.is_file():
        return target
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        partial = Path(tmp) / target.name
        try:
            proc = subprocess.run(compile_command(cxx, include, partial), capture_output=True, text=True,
                                  timeout=BUILD_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise LauncherUnavailable(f"compiling {SOURCE.name} took over {BUILD_TIMEOUT_S} s") from None
        if proc.returncode != 0:
            raise LauncherUnavailable(f"compiling {SOURCE.name} with {cxx} failed (rc {proc.returncode}): "
                                      + proc.stderr[-2000:])
        os.replace(partial, target)
    return target


_load_lock = threading.Lock()


def load() -> Any:
    """`torch.ops.cake_launcher_v3`, its library loaded once per process (every package shares it)."""
    with _load_lock:
        ops = getattr(torch.ops, NAMESPACE)
        if not hasattr(ops, "attach"):
            torch.ops.load_library(str(build()))
        if int(ops.plan_format()) != PLAN_FORMAT:
            raise LauncherUnavailable(f"the loaded launcher reads plan format {int(ops.plan_format())}, this "
                                      f"package writes {PLAN_FORMAT}")
        return ops


def select(package: str) -> tuple[Any, dict[str, str]]:
    """(the launcher ops or None, the host path record) for a package's CUDA ops in this process."""
    choice = chosen()
    if choice == "ctypes":
        return None, {"kind": "ctypes", "why": f"chosen by {HOST_PATH_ENV}=ctypes"}
    try:
        if torch.version.cuda is None and choice == "auto":  # `cpp` builds and attaches anyway (CPU tests)
            raise LauncherUnavailable(f"torch {torch.__version__} has no CUDA")
        ops = load()
    except LauncherUnavailable as error:
        if choice == "cpp":
            raise ImportError(f"{package}: {HOST_PATH_ENV}=cpp, but the C++ launcher is unavailable: "
                              f"{error}") from None
        if torch.version.cuda is not None:  # a CPU-only torch runs no CUDA op: nothing to warn about
            warnings.warn(f"{package}: CUDA ops take the ctypes host path (slower per call): {error}. "
                          f"{HOST_PATH_ENV}=ctypes chooses it explicitly", HostPathWarning, stacklevel=3)
        return None, {"kind": "ctypes", "why": str(error)}
    return ops, {"kind": "cpp", "why": f"C++ launcher ({HOST_PATH_ENV}={choice})"}
