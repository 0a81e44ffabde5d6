"""The out-variants of an exported package's ops: their schema and the checks on a caller's outputs and workspace.

Part of an exported package (copied verbatim by `cake export`): standard library and torch only.

For every op `OP` the package registers `OP_out(Tensor(a!) out0, ..., inputs..., Tensor(z!)? workspace=None)
-> ()`, the way serving stacks write their ops (vLLM's `rms_norm(out, input, weight, eps)`): the results go into
the caller's tensors, and the scratch a kernel needs into the caller's `workspace` (uint8, at least
`<package>.workspace_bytes(OP, *inputs)` bytes; its start 256-byte aligned for a CUDA kernel, 16 for a Triton
kernel: a fresh torch.empty is both), so a call allocates nothing. `check` refuses
bad arguments with the same messages as the C++ launcher's `OutKernel` (`_launcher.cpp`): a wrong dtype is a
TypeError, every other problem a ValueError, naming the argument and how to fix it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

WORKSPACE = "workspace"
WORKSPACE_DTYPE = torch.uint8
ALIAS_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def schema(outputs: Sequence[Mapping[str, Any]], inputs: Sequence[Mapping[str, Any]]) -> str:
    """`(Tensor(a!) ids, Tensor x, Tensor c, Tensor(b!)? workspace=None) -> ()`: outputs first, as vLLM's ops."""
    names = [o["name"] for o in outputs] + [i["name"] for i in inputs]
    if WORKSPACE in names or len(set(names)) != len(names):
        raise ImportError(f"an op's argument names {names} repeat or use `{WORKSPACE}`: no out-variant schema")
    if len(outputs) >= len(ALIAS_LETTERS):
        raise ImportError(f"an op with {len(outputs)} outputs: the out-variant schema names at most "
                          f"{len(ALIAS_LETTERS) - 1}")
    args = [f"Tensor({ALIAS_LETTERS[i]}!) {o['name']}" for i, o in enumerate(outputs)]
    args += [f"Tensor {i['name']}" for i in inputs]
    args.append(f"Tensor({ALIAS_LETTERS[len(outputs)]}!)? {WORKSPACE}=None")
    return f"({', '.join(args)}) -> ()"


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype)  # `torch.int32`: the C++ launcher prints the same names (`torch_name`)


def shape_text(shape: Sequence[int]) -> str:
    return str(tuple(int(s) for s in shape))


def span(t: torch.Tensor) -> tuple[int, int]:
    """The bytes a tensor's elements cover, [first, end); (0, 0) for an empty tensor."""
    count = t.numel()
    if count == 0:
        return 0, 0
    base, size = t.data_ptr(), t.element_size()
    if t.is_contiguous():  # every plan's inputs, and every accepted output: no walk over the strides
        return base, base + count * size
    low = high = 0
    for extent, stride in zip(t.shape, t.stride(), strict=True):
        reach = (extent - 1) * stride
        if reach < 0:
            low += reach
        else:
            high += reach
    return base + low * size, base + (high + 1) * size


def overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < a[1] and b[0] < b[1] and a[0] < b[1] and b[0] < a[1]


def check(op: str, name: str, outs: Sequence[Any], out_names: Sequence[str], expected: Sequence[tuple[Any, ...]],
          inputs: Sequence[torch.Tensor], input_names: Sequence[str], workspace: Any, need: int | None,
          namespace: str, align: int | None = None) -> None:
    """Refuse bad out-variant arguments of `op` (called as `name`): each output's type, dtype, device, shape and
    contiguity against `expected` ((shape, dtype) per output), the workspace's dtype, device, contiguity, size
    (`need` bytes; None: not known, as while tracing with fake tensors) and alignment (`align` bytes: the route's;
    None: a CUDA plan's, `_kernels.WORKSPACE_ALIGN_BYTES`), and any overlap between an output and an input,
    another output or the workspace (checked on real tensors only)."""
    device = inputs[0].device
    for out, out_name, (shape, dtype) in zip(outs, out_names, expected, strict=True):
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"{name}: `{out_name}` must be a torch.Tensor, got {type(out).__name__}")
        if out.dtype != dtype:
            raise TypeError(f"{name}: `{out_name}` must be {dtype_name(dtype)}, got {dtype_name(out.dtype)}")
        if out.device != device:
            raise ValueError(f"{name}: `{out_name}` is on {out.device}, the inputs on {device}")
        if tuple(out.shape) != tuple(shape):
            raise ValueError(f"{name}: `{out_name}` must have shape {shape_text(shape)} for these inputs, got "
                             f"{shape_text(out.shape)}")
        if not out.is_contiguous():
            raise ValueError(f"{name}: `{out_name}` must be contiguous, got strides {shape_text(out.stride())}")
    if workspace is not None:
        if not isinstance(workspace, torch.Tensor):
            raise TypeError(f"{name}: `{WORKSPACE}` must be a torch.Tensor or None, got {type(workspace).__name__}")
        if workspace.dtype != WORKSPACE_DTYPE:
            raise TypeError(f"{name}: `{WORKSPACE}` must be {dtype_name(WORKSPACE_DTYPE)}, got "
                            f"{dtype_name(workspace.dtype)}")
        if workspace.device != device:
            raise ValueError(f"{name}: `{WORKSPACE}` is on {workspace.device}, the inputs on {device}")
        if not workspace.is_contiguous():
            raise ValueError(f"{name}: `{WORKSPACE}` must be contiguous, got strides "
                             f"{shape_text(workspace.stride())}")
    if need:
        sizing = f"{namespace}.workspace_bytes('{op}', *inputs)"
        if workspace is None:
            raise ValueError(f"{name}: these inputs need a workspace of {need} bytes: pass workspace=torch.empty("
                             f"{need}, dtype=torch.uint8, device=...) (its size: {sizing})")
        if workspace.numel() < need:
            raise ValueError(f"{name}: `{WORKSPACE}` holds {workspace.numel()} bytes, these inputs need {need} "
                             f"({sizing})")
    real = type(inputs[0]) is torch.Tensor and all(type(t) is torch.Tensor for t in outs)
    if not real:
        return  # fake or functional tensors (tracing): no addresses to compare
    if need:
        if align is None:
            from . import _kernels  # a CUDA plan's alignment is the launcher's layout rule

            align = _kernels.WORKSPACE_ALIGN_BYTES
        offset = workspace.data_ptr() % align
        if offset:
            raise ValueError(f"{name}: `{WORKSPACE}` must start at a {align}-byte aligned address (a fresh "
                             f"torch.empty does), got {offset} bytes past one")
    spans = [span(t) for t in inputs]
    used = span(workspace) if need else (0, 0)
    earlier: list[tuple[str, tuple[int, int]]] = []
    for out, out_name in zip(outs, out_names, strict=True):
        mine = span(out)
        for input_name, other in zip(input_names, spans, strict=True):
            if overlap(mine, other):
                raise ValueError(f"{name}: `{out_name}` overlaps the input `{input_name}` in memory; outputs must "
                                 "not alias the inputs, each other or the workspace")
        for other_name, other in earlier:
            if overlap(mine, other):
                raise ValueError(f"{name}: `{out_name}` overlaps the output `{other_name}` in memory; outputs must "
                                 "not alias the inputs, each other or the workspace")
        if overlap(mine, used):
            raise ValueError(f"{name}: `{out_name}` overlaps `{WORKSPACE}` in memory; outputs must not alias the "
                             "inputs, each other or the workspace")
        earlier.append((out_name, mine))
    if need:
        for input_name, other in zip(input_names, spans, strict=True):
            if overlap(used, other):
                raise ValueError(f"{name}: `{WORKSPACE}` overlaps the input `{input_name}` in memory; outputs must "
                                 "not alias the inputs, each other or the workspace")
