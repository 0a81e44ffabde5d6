"""An exported Triton package's out-variants on the H200: written in place, captured, traced, timed (issue 15).

    python3 scripts/gpu_triton_out.py --package EXPORT_DIR --out RES [--device cpu] [--calls 1000]

EXPORT_DIR holds `kmeans_assign` and `kmeans_update` as Triton kernels that keep scratch buffers
(`cake export experiments/kmeans/assign_plain_norms.cake experiments/kmeans/update_atomic.cake`: ||c||^2 for
the assign, zero-filled sums and counts for the update). Their out-variants hand the caller's outputs and
workspace to the generated launcher (`out=`, `workspace=`): no allocation and no copy a call. At B=1 N=256
K=128 D=128 bf16 (the launch, not the kernel, is timed) it records:
- `out_equals_functional`: `kmeans_assign_out` / `kmeans_update_out` into buffers allocated once (each workspace
  `workspace_bytes` long) give the functional ops' bits, twice (the launcher's record, then its plan), and write
  where the buffers are (`same_addresses`);
- `graph`: both out-variants captured in one `torch.cuda.CUDAGraph` (buffers and workspaces allocated before, so
  the graph allocates nothing; the live fills are kernels in it), replayed before and after the inputs change
  in place: equal to eager calls;
- `compile`: `torch.compile(fullgraph=True)` of a Lloyd step calling both out-variants, through AOT autograd
  (functionalization decomposes each `triton_op` into its body: the launcher runs on FunctionalTensors, which get
  no plan and no address check, and each launch goes through `wrap_triton`: a `triton_kernel_wrapper_*` node),
  equal to the eager step; `graph_ops` lists the traced graph's call targets;
- `host_us`: host time per call (CPU clock, `gpu_export.host_time_us`) of each functional op and its out-variant.
`--device cpu` is the dry run of the plumbing: the CPU implementation (the reference) everywhere, no graph.
Writes RES/triton_out.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from gpu_export import TINY, graph_check, host_time_us, kmeans_inputs

BATCH = 50


def lloyd_inputs(ops: Any, device: str) -> tuple[Any, Any, Any]:
    x, c = kmeans_inputs(TINY, device)
    return x, c, ops.kmeans_assign(x, c).long()


def buffers(pkg: Any, x: Any, c: Any, ids64: Any) -> dict[str, Any]:
    """The outputs and workspaces of both out-variants, allocated once."""
    import torch

    def workspace(op: str, *inputs: Any) -> Any:
        size = pkg.workspace_bytes(op, *inputs)
        return torch.empty(size, dtype=torch.uint8, device=x.device) if size else None

    return {"ids": torch.empty(x.shape[:2], dtype=torch.int32, device=x.device), "c_new": torch.empty_like(c),
            "assign_ws": workspace("kmeans_assign", x, c), "update_ws": workspace("kmeans_update", x, ids64, c)}


def out_step(ops: Any, b: dict[str, Any], x: Any, c: Any, ids64: Any) -> None:
    ops.kmeans_assign_out(b["ids"], x, c, b["assign_ws"])
    ops.kmeans_update_out(b["c_new"], x, ids64, c, b["update_ws"])


def check_out(ops: Any, pkg: Any, x: Any, c: Any, ids64: Any) -> dict[str, Any]:
    import torch

    b = buffers(pkg, x, c, ids64)
    addresses = (b["ids"].data_ptr(), b["c_new"].data_ptr())
    want_ids, want_c = ops.kmeans_assign(x, c), ops.kmeans_update(x, ids64, c)
    equal = []
    for _ in range(2):
        out_step(ops, b, x, c, ids64)
        equal.append(bool(torch.equal(b["ids"], want_ids) and torch.equal(b["c_new"].view(torch.int16),
                                                                          want_c.view(torch.int16))))
    return {"out_equals_functional": equal, "same_addresses": addresses == (b["ids"].data_ptr(),
                                                                            b["c_new"].data_ptr()),
            "workspace_bytes": {"kmeans_assign": pkg.workspace_bytes("kmeans_assign", x, c),
                                "kmeans_update": pkg.workspace_bytes("kmeans_update", x, ids64, c)}}


def check_graph(ops: Any, pkg: Any) -> dict[str, Any]:
    """Both out-variants in one graph: the outputs (ids, c_new concatenated as raw int32 words) against eager."""
    import torch

    holder: dict[str, Any] = {}

    def step(x: Any, c: Any) -> Any:
        if "b" not in holder:  # the first (eager) call allocates what the captured calls write
            ids64 = ops.kmeans_assign(x, c).long()
            holder["ids64"], holder["b"] = ids64, buffers(pkg, x, c, ids64)
        b = holder["b"]
        out_step(ops, b, x, c, holder["ids64"])
        return torch.cat([b["ids"].view(-1), b["c_new"].view(torch.int16).view(-1).to(torch.int32)])

    return graph_check(step, TINY)


def check_compile(ops: Any, x: Any, c: Any, ids64: Any, pkg: Any) -> dict[str, Any]:
    import torch
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    graphs: list[Any] = []

    def forward(gm: Any, example_inputs: Any) -> Any:
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    def step(x: Any, c: Any, ids64: Any, ids: Any, c_new: Any, assign_ws: Any, update_ws: Any) -> Any:
        ops.kmeans_assign_out(ids, x, c, assign_ws)
        ops.kmeans_update_out(c_new, x, ids64, c, update_ws)
        return c_new.float() + 1

    eager, traced = buffers(pkg, x, c, ids64), buffers(pkg, x, c, ids64)
    want = step(x, c, ids64, *eager.values())
    got = torch.compile(step, fullgraph=True, backend=aot_autograd(fw_compiler=forward))(x, c, ids64,
                                                                                          *traced.values())
    targets = sorted({str(node.target) for gm in graphs for node in gm.graph.nodes if node.op == "call_function"})
    return {"equal": bool(torch.equal(got, want) and torch.equal(traced["ids"], eager["ids"])),
            "graph_ops": targets,
            "traced_kernels": any("triton_kernel_wrapper" in t for t in targets)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args(argv)

    import torch

    from cake.export.certify import import_package

    pkg = import_package(args.package)
    ops = getattr(torch.ops, pkg.namespace)
    x, c, ids64 = lloyd_inputs(ops, args.device)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    result: dict[str, Any] = {"device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
                              "routes": {name: type(op.cached_route(inputs)[1]).__name__ for name, op, inputs in
                                         (("kmeans_assign", pkg.PACKAGE.ops["kmeans_assign"], (x, c)),
                                          ("kmeans_update", pkg.PACKAGE.ops["kmeans_update"], (x, ids64, c)))}}
    result.update(check_out(ops, pkg, x, c, ids64))
    result["graph"] = check_graph(ops, pkg) if args.device == "cuda" else None
    result["compile"] = check_compile(ops, x, c, ids64, pkg)
    b = buffers(pkg, x, c, ids64)
    batches = {"batch": BATCH, "batches": max(1, args.calls // BATCH)}
    result["host_us"] = {
        "kmeans_assign": host_time_us(ops.kmeans_assign, (x, c), sync, **batches),
        "kmeans_assign_out": host_time_us(ops.kmeans_assign_out, (b["ids"], x, c, b["assign_ws"]), sync, **batches),
        "kmeans_update": host_time_us(ops.kmeans_update, (x, ids64, c), sync, **batches),
        "kmeans_update_out": host_time_us(ops.kmeans_update_out, (b["c_new"], x, ids64, c, b["update_ws"]), sync,
                                          **batches)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "triton_out.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
