"""KDA's op contracts: `kda_core` (pre-activated g and beta) and `kda_forward` (FlashKDA's fused semantics).

Both take an optional `initial_state` [N, H, K, V] fp32 and an optional `cu_seqlens` [N+1] int64 (varlen:
B = 1, segments of the packed T; empty segments allowed), and return `o` [B, T, H, V] in q's dtype beside
`final_state` [N, H, K, V] in fp32. N is the number of sequences: B when `cu_seqlens` is omitted.

Value domains (the gates never feed values outside them; see ValueDomain):
  kda_core   q, k unit L2 norm per head and token; g in [-5, 0] (log-decays, FlashKDA's lower bound, typical
             values near -0.2); beta in [0, 1] (sigmoid outputs; bf16 rounds them onto both ends); v and
             initial_state finite.
  kda_forward q, k, g (raw gate), beta (logits), v finite; A_log in [-2, 3] fp32 [H]; dt_bias in [-4, 4]
             fp32 [H, K]; the kernel normalizes q and k (eps 1e-6), applies sigmoid to beta and the safe
             gate g = -5 * sigmoid(exp(A_log) * (g + dt_bias)).
Non-finite inputs are outside both domains: the recurrence spreads a NaN to every later output of its head
in an algorithm-dependent pattern (a chunked kernel also reaches earlier tokens of the chunk through 0 * NaN),
so positions of NaN are not part of the op's meaning.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import torch
from cake.experiments.kda import controls
from cake.experiments.kda import reference as ref
from cake.verifier.contracts import (
    FLOAT_DTYPES,
    Contract,
    DimSpec,
    OutputCheck,
    Role,
    SegmentOffsets,
    TensorSpec,
    ValueDomain,
)
from cake.verifier.controls import Controls
from cake.verifier.registry import WorkloadContracts
from cake.verifier.tolerance import ToleranceModel

TOLERANCES = Path(__file__).resolve().parent / "tolerances.json"
FINITE = ValueDomain()
UNIT = ValueDomain(unit_norm=True)
LOG_DECAY = ValueDomain(low=ref.LOWER_BOUND, high=0.0, logit_center=3.0)
GATE = ValueDomain(low=0.0, high=1.0)
A_LOG = ValueDomain(low=-2.0, high=3.0)
DT_BIAS = ValueDomain(low=-4.0, high=4.0)
CU_SEQLENS = SegmentOffsets(total="T", count="N", batch="B")

# K and V are compile-time constants of every fast KDA kernel (fla's and CAKE's: one compile per pair), so their
# boundary values are few — one tail (17, 5) and one power of two below 128 — which keeps a GPU battery at
# nine (K, V) pairs; the tails of T, the batch and the varlen segments carry the rest of the shape fuzzing.
DIMS = (
    DimSpec("B", 2, 2, (1, 3)),
    DimSpec("T", 64, 1024, (1, 2, 15, 17, 33, 65, 130), long_value=160),
    DimSpec("H", 2, 4, (1, 3)),
    DimSpec("K", 16, 128, (17, 64)),
    DimSpec("V", 8, 128, (5, 64)),
    DimSpec("N", 3, 3, (1, 2, 5, 7)),
)
BTHK, BTHV, BTH, NHKV = ("B", "T", "H", "K"), ("B", "T", "H", "V"), ("B", "T", "H"), ("N", "H", "K", "V")
OPTIONAL = (TensorSpec("initial_state", NHKV, "float32", optional=True, domain=FINITE),
            TensorSpec("cu_seqlens", ("N+1",), "int64", optional=True, offsets=CU_SEQLENS))
OUTPUTS = (TensorSpec("o", BTHV, "same_as:q", Role.OUT), TensorSpec("final_state", NHKV, "float32", Role.OUT))
SEMANTICS = (
    "per sequence and head: S <- diag(exp(g_t)) S; S <- S + beta_t k_t (v_t - S^T k_t)^T; o_t = K^-1/2 S^T q_t "
    "(fla's naive_recurrent_kda, K-first state [K, V])",
    "initial_state [N, H, K, V] fp32 (0 when omitted); final_state [N, H, K, V] fp32 always returned",
    "cu_seqlens [N+1] int64 (B = 1): sequence n is tokens [c_n, c_n+1) of T and starts from initial_state[n]; "
    "empty sequences return their initial state",
    "o has q's dtype; state and accumulation in fp32",
)


def _flops(d: Mapping[str, int]) -> float:
    # Per token and head: decay (K V), S^T k (2 K V), rank-1 update (2 K V), S^T q (2 K V).
    return 7.0 * d["B"] * d["T"] * d["H"] * d["K"] * d["V"]


def _bytes(d: Mapping[str, int], dtype: torch.dtype) -> float:
    size = torch.empty((), dtype=dtype).element_size()
    tokens = d["B"] * d["T"] * d["H"]
    return tokens * (2 * d["K"] + 2 * d["V"]) * float(size) + tokens * (d["K"] * 4.0 + size) + \
        2.0 * d["N"] * d["H"] * d["K"] * d["V"] * 4.0


# Rounding error: inner products of length K at every token, carried through the state over T tokens (fp32), and
# the operands a correct kernel rounds to the input dtype (normalized q and k, decayed queries, chunk states).
TOLERANCE = ToleranceModel(table=TOLERANCES, reduction=lambda d: d["T"] * d["K"], scale=ref.kda_core_scale,
                           input_rounding=ref.kda_core_rounding)

KDA_CORE = Contract(
    name="kda_core",
    inputs=(TensorSpec("q", BTHK, domain=UNIT), TensorSpec("k", BTHK, domain=UNIT),
            TensorSpec("v", BTHV, domain=FINITE), TensorSpec("g", BTHK, "float32", domain=LOG_DECAY),
            TensorSpec("beta", BTH, domain=GATE), *OPTIONAL),
    outputs=OUTPUTS, dims=DIMS, dtypes=FLOAT_DTYPES, reference=ref.kda_core, tolerance=TOLERANCE,
    semantics=SEMANTICS + ("inputs pre-activated: g in [-5, 0] (fp32 log-decays), beta in [0, 1], q and k unit "
                           "L2 norm per token and head",),
    has_backward=False, flops=_flops, bytes=_bytes, reduction_dim="T",
    output_checks=(OutputCheck.CLOSE, OutputCheck.CLOSE), tensor_core=True,
)

KDA_FORWARD = Contract(
    name="kda_forward",
    inputs=(TensorSpec("q", BTHK, domain=FINITE), TensorSpec("k", BTHK, domain=FINITE),
            TensorSpec("v", BTHV, domain=FINITE), TensorSpec("g", BTHK, domain=FINITE),
            TensorSpec("beta", BTH, domain=FINITE), TensorSpec("A_log", ("H",), "float32", domain=A_LOG),
            TensorSpec("dt_bias", ("H", "K"), "float32", domain=DT_BIAS), *OPTIONAL),
    outputs=OUTPUTS, dims=DIMS, dtypes=FLOAT_DTYPES, reference=ref.kda_forward,
    tolerance=ToleranceModel(table=TOLERANCES, reduction=lambda d: d["T"] * d["K"], scale=ref.kda_forward_scale,
                             input_rounding=ref.kda_forward_rounding),
    semantics=SEMANTICS + (
        "fused (FlashKDA's benchmark): q, k <- x / sqrt(sum x^2 + 1e-6) per token and head; beta <- sigmoid(beta); "
        f"g <- {ref.LOWER_BOUND:g} * sigmoid(exp(A_log[h]) * (g + dt_bias[h])) (safe gate)",),
    has_backward=False, flops=_flops, bytes=_bytes, reduction_dim="T",
    output_checks=(OutputCheck.CLOSE, OutputCheck.CLOSE), tensor_core=True,
)

# Calibration and self-tests use both controls: the chunked one (operands staged through the input dtype, as a
# tensor-core kernel stages them) as `torch`, the token-by-token fp32 recurrence as `sequential`.
CONTRACTS = WorkloadContracts(
    name="kda", contracts=(KDA_CORE, KDA_FORWARD),
    controls={"kda_core": Controls(torch=controls.kda_core_chunked, sequential=controls.kda_core_recurrent),
              "kda_forward": Controls(torch=controls.kda_forward_chunked, sequential=controls.kda_forward_recurrent)})

assert math.isclose(LOG_DECAY.low, ref.LOWER_BOUND)
