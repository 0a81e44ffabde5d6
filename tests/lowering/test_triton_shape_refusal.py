"""The Triton launcher refuses a shape whose dot operands cannot fit shared memory (ShapeNotSupported,
before the launch), and turns Triton's own OutOfResources into the same refusal."""

from __future__ import annotations

import pytest
import torch
from cake.ir.nodes import DType
from cake.ir.parser import parse
from cake.lowering.runtime import load, lower
from cake.lowering.triton.budget import TritonLauncher, padded, shape_refusal
from lowering_cases import REPO

from cake.errors import ShapeNotSupported

PLAIN = REPO / "experiments" / "kmeans" / "assign_plain.cake"


def test_padding_matches_the_launcher() -> None:
    assert [padded(n) for n in (1, 16, 17, 128, 1031)] == [16, 16, 32, 128, 2048]


def test_the_long_reduction_is_refused_before_any_launch() -> None:
    text = PLAIN.read_text()
    assign = load(lower(parse(text, str(PLAIN)), "triton", filename=str(PLAIN), source_text=text))
    x, c = torch.randn(1, 5, 1031), torch.randn(1, 3, 1031)
    with pytest.raises(ShapeNotSupported) as refused:
        assign(x, c)
    reason = refused.value.reason
    assert "D=1031" in reason and "mma(xt, ct)" in reason and "232,448 on sm_90a" in reason


def test_the_estimate_lets_the_default_shape_through() -> None:
    kernel = parse(PLAIN.read_text(), str(PLAIN))
    assert shape_refusal(kernel, "sm_90a", {}, {"D": 128}, {"T": DType.BF16}) is None
    assert shape_refusal(kernel, "sm_90a", {}, {"D": 1031}, {"T": DType.BF16}) is not None


def test_triton_out_of_resources_becomes_a_refusal() -> None:
    from triton.runtime.errors import OutOfResources

    def launcher(*inputs: torch.Tensor) -> torch.Tensor:
        raise OutOfResources(300_000, 232_448, "shared memory")

    with pytest.raises(ShapeNotSupported) as refused:
        TritonLauncher(launcher, None, "sm_90a", {})(torch.zeros(2, 3))
    assert "out of resource: shared memory" in refused.value.reason and "(2, 3)" in refused.value.reason


def test_a_plain_error_is_not_a_refusal() -> None:
    def launcher(*inputs: torch.Tensor) -> torch.Tensor:
        raise ValueError("`x` must have 3 dims")

    with pytest.raises(ValueError):
        TritonLauncher(launcher, None, "sm_90a", {})(torch.zeros(2, 3))


def test_the_refusal_is_decided_once_per_call_signature(monkeypatch: pytest.MonkeyPatch) -> None:
    # a repeated call pays a dict lookup, not the walk over the declarations; each new signature is checked
    text = PLAIN.read_text()
    kernel = parse(text, str(PLAIN))
    calls: list[object] = []
    launcher = TritonLauncher(lambda *inputs: calls.append(inputs), kernel, "sm_90a", {})
    decided: list[tuple[int, ...]] = []
    real = launcher.refusal

    def refusal(inputs: tuple[torch.Tensor, ...]) -> str | None:
        decided.append(tuple(inputs[0].shape))
        return real(inputs)

    monkeypatch.setattr(launcher, "refusal", refusal)
    x, c = torch.randn(1, 5, 128), torch.randn(1, 3, 128)
    for _ in range(3):
        launcher(x, c)
    assert decided == [(1, 5, 128)] and len(calls) == 3
    big = (torch.randn(1, 5, 1031), torch.randn(1, 3, 1031))
    for _ in range(2):
        with pytest.raises(ShapeNotSupported):
            launcher(*big)
    launcher(x.half(), c.half())  # another dtype: its own decision
    assert decided == [(1, 5, 128), (1, 5, 1031), (1, 5, 128)] and len(calls) == 4
