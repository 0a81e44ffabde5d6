"""The varlen wrapper around a dense KDA schedule (experiments/kda/adapt.py): one call per non-empty sequence on views
of its tokens, writing into its views of the outputs (nothing copied in or out), each call in its own lane (a side
stream on a GPU) between one fork and one join, an empty sequence's final state its initial state, and a cu_seqlens
that does not tile [0, T) refused with what was wrong."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

import pytest
import torch
from cake.experiments.kda.adapt import varlen
from torch import Tensor

T, H, K, V = 9, 2, 4, 3


class FakeDense:
    """Writes each sequence's first token index (o) and its length (state) into the given outputs, and records
    which storage it wrote."""

    def __init__(self) -> None:
        self.written: list[tuple[int, int]] = []

    def __call__(self, q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, a_log: Tensor, dt_bias: Tensor,
                 h0: Tensor, *, out: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        o, state = out
        o.copy_(q[..., :1].expand_as(o))
        state.copy_(h0 + q.shape[1])
        self.written += [(o.data_ptr(), state.data_ptr())]
        return o, state


def _inputs() -> list[Tensor]:
    q = torch.arange(T, dtype=torch.float32)[None, :, None, None].expand(1, T, H, K).contiguous()
    k, g = torch.zeros(1, T, H, K), torch.zeros(1, T, H, K)
    v, beta = torch.zeros(1, T, H, V), torch.zeros(1, T, H)
    return [q, k, v, g, beta, torch.zeros(H), torch.zeros(H, K)]


def test_each_sequence_writes_its_own_views_of_the_outputs() -> None:
    dense = FakeDense()
    h0 = torch.randn(4, H, K, V)
    o, state = varlen(dense)(*_inputs(), h0, torch.tensor([0, 3, 3, 7, 9]))
    # three non-empty sequences, each writing in place into o's and state's storage
    assert len(dense.written) == 3
    assert all(o.data_ptr() <= p_o < o.data_ptr() + o.numel() * o.element_size() for p_o, _ in dense.written)
    assert all(state.data_ptr() <= p_s < state.data_ptr() + state.numel() * 4 for _, p_s in dense.written)
    assert o[0, :, 0, 0].tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8]
    torch.testing.assert_close(state, h0 + torch.tensor([3.0, 0.0, 4.0, 2.0])[:, None, None, None])


@pytest.mark.parametrize("cuts", [[1, 9], [0, 8], [0, 5, 3, 9]])
def test_a_cu_seqlens_that_does_not_tile_the_tokens_is_refused(cuts: list[int]) -> None:
    with pytest.raises(ValueError, match="cu_seqlens must run monotonically from 0 to T = 9"):
        varlen(FakeDense())(*_inputs(), None, torch.tensor(cuts))


class RecordingLanes:
    """Lanes that record the order of forks, each sequence's lane and the join, around a dense op that records
    which lane each call ran under."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.current: int | None = None

    @contextmanager
    def __call__(self, device: torch.device, count: int) -> Iterator[Callable[[int], AbstractContextManager[None]]]:
        self.events.append(f"fork {count}")

        @contextmanager
        def lane(turn: int) -> Iterator[None]:
            self.current = turn
            yield
            self.current = None

        yield lane
        self.events.append("join")


def test_the_sequences_run_in_lanes_forked_before_and_joined_after_them() -> None:
    lanes = RecordingLanes()

    def dense(*inputs: Tensor, out: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        assert lanes.current is not None, "a sequence ran outside its lane"
        lanes.events.append(f"lane {lanes.current} T={inputs[0].shape[1]}")
        return FakeDense()(*inputs, out=out)

    o, _ = varlen(dense, lanes)(*_inputs(), None, torch.tensor([0, 3, 3, 7, 9]))
    # the empty sequence takes no lane; the non-empty ones take a lane each, longest first, between the fork and
    # the join
    assert lanes.events == ["fork 3", "lane 0 T=4", "lane 1 T=3", "lane 2 T=2", "join"]
    assert o[0, :, 0, 0].tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8]


def test_a_dense_batch_is_one_call_without_lanes() -> None:
    lanes = RecordingLanes()
    calls: list[int] = []

    def dense(*inputs: Tensor) -> tuple[Tensor, Tensor]:
        calls.append(inputs[0].shape[1])
        return torch.zeros(1, T, H, V), inputs[-1]

    varlen(dense, lanes)(*_inputs(), None, None)
    assert calls == [T] and lanes.events == []


def test_cu_seqlens_is_read_once_until_it_changes_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    # reading a device tensor waits for the GPU: a serving loop's one cu_seqlens is read once, not once a layer
    from cake.experiments.kda import adapt

    reads: list[int] = []
    real = Tensor.tolist

    def counted(self: Tensor) -> object:
        reads.append(1)
        return real(self)

    monkeypatch.setattr(Tensor, "tolist", counted)
    cuts = torch.tensor([0, 3, 3, 7, 9])
    for _ in range(3):
        assert adapt.host_cuts(cuts) == [0, 3, 3, 7, 9]
    assert len(reads) == 1
    cuts[1] = 2  # in place: the version counter moves, so it is read again
    assert adapt.host_cuts(cuts) == [0, 2, 3, 7, 9] and len(reads) == 2
    assert adapt.host_cuts(torch.tensor([0, 2, 3, 7, 9])) == [0, 2, 3, 7, 9] and len(reads) == 3  # another tensor
