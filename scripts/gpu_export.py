"""The exported CUDA assign on the GPU: host time per call before/after, CUDA-graph capture, device timing.

    python3 scripts/gpu_export.py --package OUT_DIR --out "$OUT"

OUT_DIR is a `cake export --backend cuda` project holding kmeans_assign (scripts/gpu/export.sh writes it).
Three measurements, written to `export_gpu.json` and printed:
- host time per call (CPU clock, no synchronization) at a tiny shape, many calls in batches short enough that
  the launch queue never fills: CAKE's CUDA-backend callable (cuda-python, before) against the exported op
  through `torch.ops` and through the package's dispatcher directly (after);
- a `torch.cuda.CUDAGraph` capture of the op (torch's capture stream, as vLLM's is not the default one):
  replay must give ids identical to an eager call, before and after the inputs change in place;
- the exported op and CAKE's callable at the cell with CUDA events, interleaved, cold L2 (the timing protocol's
  `measure`), next to `cake bench`'s numbers from the same session (export.sh runs both).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

TINY = {"B": 1, "N": 256, "K": 128, "D": 128}
GRAPH = {"B": 4, "N": 4096, "K": 1024, "D": 128}
CELL = {"B": 32, "N": 65536, "K": 1024, "D": 128}
BATCH = 100  # calls between synchronizations: at <= 3 launches a call the launch queue (1024) never fills
BATCHES = 20


def host_time_us(fn: Callable[..., Any], args: Sequence[Any], sync: Callable[[], None], *, batch: int = BATCH,
                 batches: int = BATCHES) -> dict[str, float]:
    """Per-call host time (µs): the CPU time for `batch` calls to return, synchronizing only between batches."""
    per_call = []
    for _ in range(batches):
        sync()
        t0 = time.perf_counter()
        for _ in range(batch):
            fn(*args)
        per_call.append((time.perf_counter() - t0) / batch * 1e6)
    sync()
    return {"median_us": statistics.median(per_call), "min_us": min(per_call), "calls": batch * batches}


def kmeans_inputs(dims: dict[str, int], device: str, seed: int = 0) -> tuple[Any, Any]:
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    b, n, k, d = (dims[x] for x in "BNKD")
    x = torch.randn(b, n, d, generator=gen, device=device).to(torch.bfloat16)
    c = torch.randn(b, k, d, generator=gen, device=device).to(torch.bfloat16)
    return x, c


def graph_check(op: Callable[..., Any], dims: dict[str, int]) -> dict[str, Any]:
    """Capture `op` in a CUDA graph; replay must match eager calls, also after the inputs change in place."""
    import torch

    x, c = kmeans_inputs(dims, "cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up off the default stream, as torch's capture recipe asks
        for _ in range(3):
            op(x, c)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ids = op(x, c)
    graph.replay()
    first = bool(torch.equal(ids, op(x, c)))
    x2, c2 = kmeans_inputs(dims, "cuda", seed=1)
    x.copy_(x2)
    c.copy_(c2)
    graph.replay()
    second = bool(torch.equal(ids, op(x, c)))
    torch.cuda.synchronize()
    return {"dims": dims, "replay_equals_eager": first, "after_inputs_change": second}


def device_times(contestants: dict[str, Callable[..., Any]], reference: Callable[..., Any],
                 dims: dict[str, int]) -> dict[str, float]:
    """Median ms per contestant at `dims`: the timing protocol's `measure` (interleaved, cold L2, two rotated
    input sets); each output must equal `reference`'s ids exactly (the same cubin source) before and after."""
    import torch
    from cake.verifier.timing import Contestant, CudaClock, TimingConfig, measure

    sets = [kmeans_inputs(dims, "cuda", seed=i) for i in range(2)]
    expected = {id(s[0]): reference(*s) for s in sets}

    def check(inputs: tuple[Any, ...], outputs: tuple[Any, ...]) -> str | None:
        return None if torch.equal(outputs[0], expected[id(inputs[0])]) else "ids differ from CAKE's callable"

    runs = [Contestant(name, fn, candidate=False) for name, fn in contestants.items()]
    samples = measure(runs, sets, CudaClock(), check, TimingConfig(max_reps=50, max_wall_s=20.0))
    return {s.name: s.median_ms if s.ok else float("nan") for s in samples}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--package", type=Path, required=True, help="the exported project (CUDA kmeans_assign)")
    parser.add_argument("--schedule", type=Path, default=Path("experiments/kmeans/assign_pingpong.cake"))
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    import torch
    from cake.experiments.schedules import load_schedule_file

    from cake.export.certify import import_package

    pkg = import_package(args.package)
    exported = getattr(torch.ops, pkg.namespace).kmeans_assign
    dispatcher = pkg.PACKAGE.ops["kmeans_assign"]
    before = load_schedule_file(args.schedule, backend="cuda")
    x, c = kmeans_inputs(TINY, "cuda")
    for fn in (before, exported, dispatcher):  # compile/load, encode tensor maps, build the call plans
        assert torch.equal(fn(x, c), before(x, c))
    sync = torch.cuda.synchronize
    result: dict[str, Any] = {"device": torch.cuda.get_device_name(), "tiny": TINY, "host_us": {
        "cake_cuda_backend": host_time_us(before, (x, c), sync),
        "exported_torch_ops": host_time_us(exported, (x, c), sync),
        "exported_dispatcher": host_time_us(dispatcher, (x, c), sync),
    }}
    print(json.dumps(result["host_us"], indent=1), flush=True)
    result["graph"] = graph_check(exported, GRAPH)
    print(json.dumps(result["graph"]), flush=True)
    result["cell_ms"] = device_times({"exported": exported, "cake_cuda_backend": before}, before, CELL)
    result["fallback_counts"] = pkg.fallback_counts()
    print(json.dumps({k: result[k] for k in ("cell_ms", "fallback_counts")}), flush=True)
    (args.out / "export_gpu.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
