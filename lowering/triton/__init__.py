"""The Triton backend: plain `triton.language`, runnable on a GPU and under `TRITON_INTERPRET=1` on a CPU.

Importing this package registers the backend (`cake.lowering.backend.get_backend("triton")`)."""

from cake.lowering.backend import register_backend
from cake.lowering.triton.backend import TritonBackend

BACKEND = register_backend(TritonBackend())
