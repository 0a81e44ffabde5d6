"""Smoke-call FlashKDA (`flash_kda.fwd`, built by scripts/gpu/flashkda_build.sh) on two tiny inputs through the
KDA baseline's adapter and judge each against the fp64 reference with the kda_forward contract's tolerance:

    python3 scripts/gpu_flashkda_smoke.py --json OUT.json [--device cuda]

* varlen at FlashKDA's own width (B = 1, T = 64, H = 2, K = V = 128, sequences 17 / 0 / 47, an fp32 initial
  state): the call the benchmark makes, nothing padded;
* dense at K = V = 64 (B = 2, T = 33, no initial state): the zero-padding path the gates' narrower widths take.

This is a seconds-long check that the built extension loads, accepts the adapter's arguments and computes the op,
before the gates (`cake verify`) spend their minute; it is no verdict. It prints where the module was loaded from
and one line per case, writes JSON, and exits 0 when both cases match, 1 when one does not, 2 when flash_kda
cannot be imported (the message says how to build it).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import torch
from cake.experiments.kda.baselines import FLASH_KDA_HINT, flash_kda_forward
from cake.verifier.compare import compare
from cake.verifier.contracts import get_contract
from cake.verifier.inputs import Layout, ValueFamily, make_case

OP = "kda_forward"
CASES: tuple[dict[str, Any], ...] = (
    {"name": "varlen_128", "B": 1, "T": 64, "H": 2, "K": 128, "V": 128, "lengths": (17, 0, 47), "state": True},
    {"name": "dense_64", "B": 2, "T": 33, "H": 2, "K": 64, "V": 64, "lengths": None, "state": False},
)


def case_inputs(case: dict[str, Any], device: str, seed: int) -> tuple[Any, ...]:
    """kda_forward's inputs for `case`, drawn as the benchmark draws them (bf16 tokens, A_log = log U(1, 16),
    dt_bias ~ N(0, 1) clamped to the contract's [-4, 4])."""
    gen = torch.Generator().manual_seed(seed)
    b, t, h, k, v = (case[d] for d in "BTHKV")

    def randn(*size: int) -> torch.Tensor:
        return torch.randn(size, generator=gen)

    lengths = case["lengths"]
    cu = None if lengths is None else torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int64)
    count = b if cu is None else len(lengths)
    tokens = [randn(b, t, h, k), randn(b, t, h, k), randn(b, t, h, v), randn(b, t, h, k), randn(b, t, h)]
    a_log = torch.empty(h).uniform_(1.0, 16.0, generator=gen).log()
    dt_bias = randn(h, k).clamp(-4.0, 4.0)
    h0 = 0.1 * randn(count, h, k, v) if case["state"] else None
    cpu = (*(x.to(torch.bfloat16) for x in tokens), a_log, dt_bias, h0, cu)
    return tuple(None if x is None else x.to(device) for x in cpu)


def judge(case: dict[str, Any], module: Any, device: str, seed: int) -> dict[str, Any]:
    inputs = case_inputs(case, device, seed)
    started = time.monotonic()
    o, state = flash_kda_forward(module, *inputs)
    if device == "cuda":
        torch.cuda.synchronize()
    call_s = time.monotonic() - started
    host_in = tuple(None if x is None else x.cpu() for x in inputs)
    host_out = (o.cpu(), state.cpu())
    lengths = case["lengths"]
    dims = {"B": case["B"], "T": case["T"], "H": case["H"], "K": case["K"], "V": case["V"],
            "N": case["B"] if lengths is None else len(lengths)}
    omitted = tuple(name for name, x in (("initial_state", inputs[7]), ("cu_seqlens", inputs[8])) if x is None)
    result = compare(get_contract(OP), make_case(dims, torch.bfloat16, ValueFamily.RANDN, Layout.CONTIGUOUS, seed,
                                                 "SMOKE", 0, omitted), host_in, host_out)
    return {"case": case["name"], "dims": dims, "lengths": lengths, "ok": result.ok, "reason": result.reason,
            "first_call_s": round(call_s, 3), "finite": bool(host_out[0].isfinite().all() and host_out[1].isfinite().all())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/gpu_flashkda_smoke.py", description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--device", default="cuda", help="where the inputs live (FlashKDA itself runs on CUDA only)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        module = importlib.import_module("flash_kda")
    except ImportError as missing:
        print(f"flash_kda is not importable ({missing}); {FLASH_KDA_HINT}", file=sys.stderr)
        return 2
    try:
        version = metadata.version("flash_kda")
    except metadata.PackageNotFoundError:
        version = "no distribution metadata"
    where = str(getattr(module, "__file__", None))
    print(f"flash_kda {version} from {where}; torch {torch.__version__}", flush=True)
    results = [judge(case, module, args.device, args.seed) for case in CASES]
    for r in results:
        print(f"{r['case']:12} {'PASS' if r['ok'] else 'FAIL'}  {r['reason']}  (first call {r['first_call_s']} s)",
              flush=True)
    args.json.write_text(json.dumps({"op": OP, "flash_kda": version, "module": where, "torch": torch.__version__,
                                     "device": args.device, "cases": results}, indent=2) + "\n")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
