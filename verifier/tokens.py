"""Replay tokens: a readable string naming one generated case, enough to regenerate its bytes.

    cake1:<op>:<gate>:<seed>:<case_index>:<dtype>:<device>[:<dim>=<size>,...]

The optional last field overrides dims (a minimized case). Values never depend on the device, so a token
taken on a GPU replays on the CPU with the same input hash.
"""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "cake1"


class BadTokenError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class ReplayToken:
    op: str
    gate_id: str
    seed: int
    case_index: int
    dtype: str
    device: str
    dims: tuple[tuple[str, int], ...] = ()

    def encode(self) -> str:
        fields = [PREFIX, self.op, self.gate_id, str(self.seed), str(self.case_index), self.dtype, self.device]
        if self.dims:
            fields.append(",".join(f"{k}={v}" for k, v in self.dims))
        return ":".join(fields)

    def __str__(self) -> str:
        return self.encode()

    @staticmethod
    def decode(text: str) -> ReplayToken:
        parts = text.strip().split(":")
        if len(parts) not in (7, 8) or parts[0] != PREFIX:
            raise BadTokenError(f"not a replay token: `{text}` (expected {PREFIX}:op:gate:seed:case:dtype:device)")
        try:
            dims = tuple((k, int(v)) for k, v in (kv.split("=") for kv in parts[7].split(","))) if len(parts) == 8 else ()
            return ReplayToken(parts[1], parts[2], int(parts[3]), int(parts[4]), parts[5], parts[6], dims)
        except ValueError as exc:
            raise BadTokenError(f"malformed replay token `{text}`: {exc}") from None
