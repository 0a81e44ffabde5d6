"""Trace a Lloyd step through an exported Triton package's out-variants the way torch.compile's AOT autograd does
on a GPU, without one: prints one JSON line (the traced graph's call targets, the `@triton.jit` function behind
each `triton_kernel_wrapper_*` node, the package's own jit functions).

    python tests/export/trace_triton_out.py EXPORT_DIR

EXPORT_DIR: `cake export experiments/kmeans/assign_plain_norms.cake experiments/kmeans/update_atomic.cake`.
Run in a process *without* TRITON_INTERPRET: torch traces only the JIT's kernels (`wrap_triton`), not the
interpreter's. The sequence is `scripts/gpu_triton_out.py`'s (issue 15): eager calls first, then the trace. A
triton_op's eager CUDA body runs with torch's wrap_triton switched off; a CPU-only torch cannot run it, so the
kernels' modules are loaded in that same state here. The inputs are fake CUDA tensors, and AOT autograd's
functionalization (`aot_export_module`: its graph capture without the runtime, which would need a CUDA build)
decomposes each `triton_op` into its body: the launchers run on FunctionalTensors over them. Without a driver
torch cannot read a kernel's TTIR for what it mutates and assumes every tensor argument is (a warning on stderr).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch
from torch._functorch.aot_autograd import aot_export_module
from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table
from torch._library.triton import set_wrap_triton_enabled
from torch._subclasses.fake_tensor import FakeTensorMode
from triton.runtime.jit import JITFunction

from cake.export.certify import import_package

B, N, K, D = 1, 256, 128, 128  # scripts/gpu_triton_out.py's shape (gpu_export.TINY)


def jit_name(kernel: Any) -> str:
    """The `@triton.jit` function's name behind a side-table kernel (torch wraps one launched with num_warps=
    or num_stages= in an Autotuner of one config)."""
    while not isinstance(kernel, JITFunction):
        kernel = kernel.fn
    return str(kernel.fn.__name__)


class LloydStep(torch.nn.Module):
    """`scripts/gpu_triton_out.py`'s `check_compile` step (both out-variants into the caller's buffers), then the
    functional assign (its `triton_op` body takes the same launcher, allocating its output)."""

    def __init__(self, ops: Any):
        super().__init__()
        self.ops = ops

    def forward(self, x: torch.Tensor, c: torch.Tensor, ids64: torch.Tensor, ids: torch.Tensor, c_new: torch.Tensor,
                assign_ws: torch.Tensor, update_ws: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.ops.kmeans_assign_out(ids, x, c, assign_ws)
        self.ops.kmeans_update_out(c_new, x, ids64, c, update_ws)
        return c_new.float() + 1, self.ops.kmeans_assign(x, c_new)


def main(root: Path) -> None:
    pkg = import_package(root)
    ops = getattr(torch.ops, pkg.namespace)
    variants = {v for op in pkg.PACKAGE.ops.values() for _, _, vs in op.buckets for v in vs}
    with set_wrap_triton_enabled(False):  # where the first (eager) call loads them
        modules = [sys.modules[v.host().__module__] for v in variants]
    with FakeTensorMode():
        x = torch.randn(B, N, D, dtype=torch.bfloat16, device="cuda")
        c = torch.randn(B, K, D, dtype=torch.bfloat16, device="cuda")
        ids64 = torch.zeros(B, N, dtype=torch.int64, device="cuda")
        ids = torch.empty(B, N, dtype=torch.int32, device="cuda")
        c_new = torch.empty_like(c)
        workspaces = [torch.empty(pkg.workspace_bytes(op, *inputs), dtype=torch.uint8, device="cuda")
                      for op, inputs in (("kmeans_assign", (x, c)), ("kmeans_update", (x, ids64, c)))]
        graph, _ = aot_export_module(LloydStep(ops), (x, c, ids64, ids, c_new, *workspaces), trace_joint=False)
    assert isinstance(graph, torch.fx.GraphModule)  # aot_export_module's forward graph (no runtime wrapper)
    calls = [node for node in graph.graph.nodes if node.op == "call_function"]
    print(json.dumps({
        "targets": sorted({str(node.target) for node in calls}),
        "traced_kernels": [jit_name(kernel_side_table.get_kernel(node.kwargs["kernel_idx"])) for node in calls
                           if str(node.target).startswith("triton_kernel_wrapper")],
        "jit_functions": sorted(name for module in modules for name, value in vars(module).items()
                                if isinstance(value, JITFunction)),
    }))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
