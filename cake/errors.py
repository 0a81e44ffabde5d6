"""Exceptions shared by the lowering and the verifier (a foundation module: it imports nothing of CAKE).

`ShapeNotSupported` is how a kernel says "I cannot run this shape" — the way cuBLAS returns
NOT_SUPPORTED or flash-kmeans switches algorithms. The verifier records such a case as refused: it is
neither run nor judged, it is listed in the verdict, and a kernel that refuses every case is never a pass.
"""

from __future__ import annotations


class ShapeNotSupported(Exception):
    """The kernel cannot run at these input shapes; `reason` says which shape and which limit.

    Raise it BEFORE any work (no output written, no input touched), and only for shapes the kernel cannot
    run — a resource limit, a tile that does not fit on chip, a dim outside the kernel's domain. Never raise
    it for numerical trouble (NaN, overflow, bad values): that is the verifier's to judge, and a refusal that
    depends on values rather than shapes hides a bug.
    """

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
