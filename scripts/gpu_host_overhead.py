"""Host time per call of an exported kmeans_assign, per host path, and CUDA-graph replay (issue 15 item 2).

    python3 scripts/gpu_host_overhead.py --package EXPORT_DIR --label NAME --out RES [--device cpu] [--keep-fills]
    python3 scripts/gpu_host_overhead.py --summarize RES/host_A.json RES/host_B.json ... --out RES

A package's host path (the C++ launcher or ctypes) is chosen when it is imported (`CAKE_EXPORT_HOST_PATH`), so
each path runs in a process of its own (scripts/gpu/s4_launcher.sh runs cpp, ctypes and an exported Triton
assign). One run measures at a tiny shape (B=1 N=256 K=128 D=128 bf16: the launch, not the kernel, is timed),
2,000 calls in batches of 100 with a synchronization between batches only, CPU clock (`gpu_export.host_time_us`):
- `torch.ops.<ns>.kmeans_assign` (the packet, as a user calls it) and its `.default` overload;
- `torch_ops_held`: the packet with every result kept alive (appended to a list): each call's block, and so the
  scratch's address, is new, so the scratch's tensor map is encoded afresh (the shared block's worst case; with
  results dropped the allocator hands the same block back and the map is cached);
- the package's Python dispatcher called directly (`ExportedOp.__call__`: the route cache, the ctypes plan);
- `torch_ops_out` / `torch_ops_out_default`: the out-variant `kmeans_assign_out(ids, x, c, workspace)` (packet
  and `.default`) into ids and a workspace allocated once (`<package>.workspace_bytes`): no allocation a call;
- `torch.empty` of the output alone: the floor any op returning a fresh tensor pays;
- with the C++ launcher, `torch.ops.cake_launcher_v3.plan_format()`: a C++ op with no tensors, the floor of
  any call through `torch.ops` from Python.
`CAKE_LAUNCHER_SEPARATE_SCRATCH=1 CAKE_LAUNCHER_AUTOGRAD_FALLBACK=1` in the environment restore session 5's
C++ host path (each scratch buffer allocated on its own instead of in the tail of the ids' block; autograd's
not-implemented fallback in front of the kernel): the same comparison for session 6's host work. The
launcher's per-call memory (`launcher_layout`: allocations a call, block bytes) and whether the fallback is
skipped are recorded.
`--keep-fills` sets every scratch buffer on every call, as before the export proved some fills dead
(`cake.ir.overwrite`): the previous host work, for comparison in the same session. The ids of seeded inputs
at the tiny and the graph shape are saved (`ids_NAME.pt`) so that `--summarize` can check that runs agree;
before each, blocks of every scratch buffer's size (and of the launcher's shared block, which holds the ids and
the scratch) are filled with 0xFF bytes (NaN as f32) and freed, so that the caching allocator hands one back as
the scratch: a buffer no launch overwrote would change the ids.
Then: the op's ids equal the Python path's (`<op>_route` where the launcher runs the op, else the dispatcher),
and the out-variant's equal the op's; a `torch.cuda.CUDAGraph` capture replays the eager ids before and after
the inputs change in place, for the op and for the out-variant (ids and workspace allocated before the
capture: the graph allocates nothing; its replayed ids must equal the functional op's eager ids), the
launcher's counters (calls it ran / sent to Python / plans), and a cProfile of 200 calls (`host_profile_NAME.txt`).
Writes `host_NAME.json`; `--summarize` prints the table over runs, and per column the median, min and max of
the runs' medians (run it over runs of one configuration in separate processes: the headline's interval), and
writes `host_summary.json`.
`--device cpu` is the dry run of the plumbing (the CPU implementation timed, no graph, no profile).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
from pathlib import Path
from typing import Any

from gpu_export import GRAPH, graph_check, host_time_us, kmeans_inputs

TINY = {"B": 1, "N": 256, "K": 128, "D": 128}
PROFILED_CALLS = 200
COLUMNS = ("torch_ops", "torch_ops_default", "torch_ops_held", "torch_ops_out", "torch_ops_out_default", "dispatcher",
           "empty_floor", "op_call_floor")
GOAL_US = 10.0  # issue 15's host time per call outside a graph
LAUNCHER_NAMESPACE = "cake_launcher_v3"  # the C++ launcher's library (`_launcher.NAMESPACE`)


def keep_fills(pkg: Any) -> None:
    """Every scratch buffer of the package's CUDA variants set on every call (before any call plan is built)."""
    for op in pkg.PACKAGE.ops.values():
        for _, _, variants in op.buckets:
            for variant in variants:
                if getattr(variant, "backend", "") == "cuda":
                    variant.scratch = [(*entry[:4], None) for entry in variant.scratch]


def poison_scratch(pkg: Any, op: Any, inputs: tuple[Any, ...]) -> int:
    """Fill and free blocks of the size of each scratch buffer of `inputs`' call plan (the allocator reuses them
    for the next allocation of that size on this stream); the number of scratch buffers poisoned."""
    import torch

    plans = getattr(op.routes.get(pkg._ops.signature(inputs)), "scratch", [])
    sizes = [torch.empty(plan.alloc, dtype=plan.dtype, device="meta").nbytes for plan in plans]
    layout = op.launcher_layout(inputs) if plans and hasattr(op, "launcher_layout") else {}
    if layout.get("block_bytes"):
        sizes.append(layout["block_bytes"])  # the launcher's one block: the ids, then the scratch
    for size in sizes:
        blocks = [torch.empty(size, dtype=torch.uint8, device=inputs[0].device).fill_(255) for _ in range(4)]
        del blocks
    return len(plans)


def out_buffers(pkg: Any, x: Any, c: Any) -> tuple[Any, Any]:
    """(ids, workspace or None) for `kmeans_assign_out` at these inputs, allocated once."""
    import torch

    size = pkg.workspace_bytes("kmeans_assign", x, c)
    ids = torch.empty((x.shape[0], x.shape[1]), dtype=torch.int32, device=x.device)
    return ids, (torch.empty(size, dtype=torch.uint8, device=x.device) if size else None)


def out_graph_check(pkg: Any, out_op: Any, functional: Any, dims: dict[str, int]) -> dict[str, Any]:
    """Capture the out-variant in a CUDA graph (its ids and workspace allocated before): replay must equal the
    functional op's eager ids, also after the inputs change in place."""
    import torch

    x, c = kmeans_inputs(dims, "cuda")
    ids, workspace = out_buffers(pkg, x, c)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up off the default stream, as torch's capture recipe asks
        for _ in range(3):
            out_op(ids, x, c, workspace)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out_op(ids, x, c, workspace)
    ids.fill_(-1)
    graph.replay()
    first = bool(torch.equal(ids, functional(x, c)))
    x2, c2 = kmeans_inputs(dims, "cuda", seed=1)
    x.copy_(x2)
    c.copy_(c2)
    graph.replay()
    second = bool(torch.equal(ids, functional(x, c)))
    torch.cuda.synchronize()
    return {"dims": dims, "replay_equals_eager": first, "after_inputs_change": second,
            "workspace_bytes": 0 if workspace is None else workspace.numel()}


def measure(package: Path, label: str, device: str, out: Path, fills: bool = False) -> dict[str, Any]:
    import torch

    from cake.export.certify import import_package

    pkg = import_package(package)
    if fills:
        keep_fills(pkg)
    ops = getattr(torch.ops, pkg.namespace)
    exported, dispatcher = ops.kmeans_assign, pkg.PACKAGE.ops["kmeans_assign"]
    route = getattr(ops, "kmeans_assign_route", None) if device == "cuda" else None  # the route is CUDA-only
    python_path = route or dispatcher
    x, c = kmeans_inputs(TINY, device)
    ids = exported(x, c)  # first call: route, load, plans (the launcher's installed here)
    equal = bool(torch.equal(exported(x, c), python_path(x, c))) and bool(torch.equal(ids, exported(x, c)))
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    batches = {} if device == "cuda" else {"batch": 5, "batches": 2}  # the CPU dry run: plumbing, not timing
    shape, dtype = ids.shape, ids.dtype
    out_op = ops.kmeans_assign_out
    ids_out, workspace = out_buffers(pkg, x, c)
    out_op(ids_out, x, c, workspace)  # the plan is the op's (installed by its first call): no new route
    out_equal = bool(torch.equal(ids_out, ids))
    held: list[Any] = []
    result: dict[str, Any] = {
        "label": label, "package": str(package), "namespace": pkg.namespace, "device": device,
        "device_name": torch.cuda.get_device_name() if device == "cuda" else "cpu", "tiny": TINY,
        "host_path": dict(getattr(pkg, "host_path", {}) or {"kind": "triton", "why": "Triton ops (triton_op)"}),
        "ids_equal_python_path": equal,
        "host_us": {
            "torch_ops": host_time_us(exported, (x, c), sync, **batches),
            "torch_ops_default": host_time_us(exported.default, (x, c), sync, **batches),
            "torch_ops_held": host_time_us(lambda *a: held.append(exported(*a)), (x, c), sync, **batches),
            "torch_ops_out": host_time_us(out_op, (ids_out, x, c, workspace), sync, **batches),
            "torch_ops_out_default": host_time_us(out_op.default, (ids_out, x, c, workspace), sync, **batches),
            "dispatcher": host_time_us(dispatcher, (x, c), sync, **batches),
            "empty_floor": host_time_us(lambda: torch.empty(shape, dtype=dtype, device=device), (), sync, **batches),
        },
        "scratch_fills": "every call" if fills else "where live",
        "held_results": len(held),
        "out_equals_functional": out_equal and bool(torch.equal(ids_out, exported(x, c))),
        "workspace_bytes": 0 if workspace is None else workspace.numel(),
        "launcher_workspace": dispatcher.launcher_workspace((x, c)) if hasattr(dispatcher, "launcher_workspace")
        else {},
        "launcher_layout": dispatcher.launcher_layout((x, c)) if hasattr(dispatcher, "launcher_layout") else {},
        "autograd_fallback_skipped": bool(getattr(dispatcher, "autograd_bypassed", False)),
    }
    held.clear()  # the kept results, freed before the poisoned and graph checks
    launcher = getattr(torch.ops, LAUNCHER_NAMESPACE, None)
    if launcher is not None and hasattr(launcher, "plan_format"):
        result["host_us"]["op_call_floor"] = host_time_us(launcher.plan_format, (), sync, **batches)
    saved, poisoned = {}, {}
    for name, dims in ({"tiny": TINY} | ({"graph": GRAPH} if device == "cuda" else {})).items():
        inputs = kmeans_inputs(dims, device)
        exported(*inputs)  # a new shape's first call runs in Python and installs the launcher's plan
        poisoned[name] = poison_scratch(pkg, dispatcher, inputs)
        saved[name] = exported(*inputs).cpu()
    torch.save(saved, out / f"ids_{label}.pt")
    result["poisoned_scratch_buffers"] = poisoned
    if device == "cuda":
        result["graph"] = graph_check(exported, GRAPH)
        result["out_graph"] = out_graph_check(pkg, out_op, exported, GRAPH)
        profiler = cProfile.Profile()
        sync()
        profiler.enable()
        for _ in range(PROFILED_CALLS):
            exported(x, c)
        profiler.disable()
        sync()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(25)
        (out / f"host_profile_{label}.txt").write_text(text.getvalue())
    result["launcher_stats"] = pkg.launcher_stats() if hasattr(pkg, "launcher_stats") else {}
    return result


def same_ids(paths: list[Path]) -> dict[str, bool]:
    """Per run after the first, whether its saved ids (`ids_NAME.pt` beside `host_NAME.json`) equal the first's."""
    import torch

    saved = {p: p.with_name(p.name.replace("host_", "ids_", 1).replace(".json", ".pt")) for p in paths}
    present = [p for p in paths if saved[p].is_file()]
    if len(present) < 2:
        return {}
    first = torch.load(saved[present[0]])
    out = {}
    for p in present[1:]:
        ids = torch.load(saved[p])
        out[json.loads(p.read_text())["label"]] = ids.keys() == first.keys() and all(
            torch.equal(ids[k], first[k]) for k in first)
    return out


def summarize(paths: list[Path]) -> dict[str, Any]:
    runs = [json.loads(p.read_text()) for p in paths]
    print(f"{'run':<14} {'host path':<8} " + " ".join(f"{c:>21}" for c in COLUMNS) + "  graph  out  ids  launcher")
    for run in runs:
        us = " ".join(f"{run['host_us'][c]['median_us']:18.1f} us" if c in run["host_us"] else f"{'-':>21}"
                      for c in COLUMNS)
        graphs = [graph_ok(run.get("graph", {})), graph_ok(run.get("out_graph", {}))]
        out_ok = run.get("out_equals_functional", "-")
        stats = run["launcher_stats"].get("kmeans_assign", {})
        print(f"{run['label']:<14} {run['host_path']['kind']:<8} {us}  {'/'.join(graphs):<5}  {out_ok!s:<4} "
              f"{run['ids_equal_python_path']!s:<4} {stats or '-'}")
    across = across_runs(runs)
    print(f"{'across runs':<23} " + " ".join(
        f"{a['median_us']:6.1f} [{a['min_us']:.1f},{a['max_us']:.1f}]".rjust(21) if a else f"{'-':>21}"
        for a in across.values()) + f"  median [min,max] of {len(runs)} runs' medians")
    agree = same_ids(paths)
    if agree:
        print(f"ids equal to {runs[0]['label']}'s (seeded inputs, tiny and graph shapes): {agree}")
    return {"runs": runs, "goal_us": GOAL_US, "ids_equal_first_run": agree, "across_runs": across,
            "met": {run["label"]: run["host_us"]["torch_ops"]["median_us"] <= GOAL_US for run in runs},
            "met_across_runs": bool(across["torch_ops"]) and across["torch_ops"]["max_us"] <= GOAL_US,
            "met_out": {run["label"]: run["host_us"]["torch_ops_out"]["median_us"] <= GOAL_US for run in runs
                        if "torch_ops_out" in run["host_us"]},
            "met_out_across_runs": bool(across["torch_ops_out"]) and across["torch_ops_out"]["max_us"] <= GOAL_US}


def graph_ok(graph: dict[str, Any]) -> str:
    """'True' when a capture's replays equal eager before and after the inputs change, '-' when not run."""
    return "-" if not graph else str(graph["replay_equals_eager"] and graph["after_inputs_change"])


def across_runs(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per column, the median, min and max over runs of each run's median (runs in separate processes)."""
    out: dict[str, dict[str, float]] = {}
    for column in COLUMNS:
        medians = [run["host_us"][column]["median_us"] for run in runs if column in run["host_us"]]
        out[column] = {"median_us": statistics.median(medians), "min_us": min(medians), "max_us": max(medians),
                       "runs": len(medians)} if medians else {}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--package", type=Path, help="an exported project holding kmeans_assign")
    parser.add_argument("--label", default="run")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--summarize", type=Path, nargs="+", help="host_*.json files of earlier runs")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--keep-fills", action="store_true", help="set every scratch buffer on every call")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.summarize:
        summary = summarize(args.summarize)
        (args.out / "host_summary.json").write_text(json.dumps(summary, indent=1) + "\n")
        return
    if args.package is None:
        parser.error("--package or --summarize is required")
    result = measure(args.package, args.label, args.device, args.out, fills=args.keep_fills)
    (args.out / f"host_{args.label}.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
