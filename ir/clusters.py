"""What a thread-block cluster's CTAs agree on, as facts the checker (`checks/cluster.py`) and the pass that
clusters a launch (`transforms/cluster_multicast.py`) both read.

The CTAs of a cluster run one program; they differ only in the clustered grid axis (the CTA of rank r takes tile
`group * SIZE + r`). So whatever is computed from that axis may differ between them, and everything else agrees.
"""

from __future__ import annotations

from collections.abc import Iterator

from cake.ir import nodes as n
from cake.ir.analysis import ref_name
from cake.ir.visit import mentions, walk_body


def varying_names(role: n.Role, axis: str) -> frozenset[str]:
    """Names whose value may differ between a cluster's CTAs in `role`: the clustered axis and every let or
    loop-carried tile computed from it (transitively, in program order)."""
    varying = {axis}
    for site in walk_body(role.body):
        stmt = site.stmt
        if isinstance(stmt, (n.Let, n.Assign)) and mentions(stmt.value, frozenset(varying)):
            varying.add(stmt.name)
    return frozenset(varying)


def first_varying(node: object, varying: frozenset[str]) -> str | None:
    """The first name (alphabetically) of `varying` that `node` refers to, None when it refers to none."""
    return next((v for v in sorted(varying) if mentions(node, frozenset({v}))), None)


def copy_guards(role: n.Role) -> Iterator[tuple[n.Copy, str]]:
    """(copy, barrier) for each copy of `role` that follows a `wait` in its block: the barrier it last waits on
    before the copy, which is what says the stage it fills is free again."""
    last_wait: dict[tuple[int, ...], str] = {}
    for site in walk_body(role.body):
        block = site.path[:-1]
        stmt = site.stmt
        if isinstance(stmt, n.Wait) and (name := ref_name(stmt.barrier)) is not None:
            last_wait[block] = name
        elif isinstance(stmt, n.Copy) and block in last_wait:
            yield stmt, last_wait[block]
