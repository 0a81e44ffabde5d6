"""Diagnostic codes the lowering emits (E07xx). The checker owns E00xx–E06xx; these cover what only the
lowering and the compilers behind it can find. Each code has one meaning, listed here once."""

from __future__ import annotations

# A `--param` / params assignment names no param of the schedule, or a value outside its domain.
BAD_PARAM = "E0701"  # raised by cake.ir.transforms.bind_params (the IR cannot import the lowering)
# A construct the backend cannot express reached the emitter (the checker's capability checks refuse these
# first; this is the emitter's own refusal, never a silent simplification).
UNSUPPORTED = "E0702"
# The host cannot bind a dim or a dtype variable from the input tensors.
HOST_BINDING = "E0703"
# The backend's compiler rejected the generated code; mapped back to the schedule line that produced it.
COMPILE_ERROR = "E0704"
# The backend named is not registered or cannot be imported in this installation.
NO_BACKEND = "E0705"
