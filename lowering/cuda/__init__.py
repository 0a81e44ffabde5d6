"""The CUDA backend: readable C++ for sm_80, sm_90a and sm_100a, compiled with nvcc, launched through
cuda-python on torch tensors. Importing this package registers the backend (`get_backend("cuda")`).

| module | responsibility |
|---|---|
| `program` | `generate(kernel, arch, ...)`: one self-contained translation unit per specialization |
| `plan` | threads per role, issuer roles, barrier init counts (arrivals re-checked as an invariant) |
| `kernelgen` | one `__global__` per IR launch: argument block, smem carve-up, barrier init, TMEM, role dispatch |
| `stmts` / `exprs` | statements and expressions of a role body (emit rules in `rules`) |
| `infer` | per-role facts codegen needs first: ranks, loop-carried names, vector layout families |
| `values` / `layouts` | tile values and where their elements live (fragments, smem swizzles) |
| `dialects` | what differs per target: mma.sync / wgmma / tcgen05, TMA, barrier waits |
| `compile` | nvcc + ptxas resource report (`ResourceReport`) |
| `launch` | cubin loading, tensor maps, argument packing, launches (cuda.bindings driver API) |
| `backend` | the runtime's Backend protocol and the host callable |
| `include/*.cuh` | the PTX wrappers generated code calls (inlined into each translation unit) |
"""

from cake.lowering.backend import register_backend
from cake.lowering.cuda.backend import CudaBackend

BACKEND = register_backend(CudaBackend())
