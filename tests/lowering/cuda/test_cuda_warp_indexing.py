"""Every warp of a role computes and writes its own share of an mma.sync tile, for every warp count and target.

The generated source is read back (the role prologue that gives each thread its warp index, the fragment
struct, the ldmatrix addresses of the A and B operands, the guard of a row-vector store, the slots of the
cross-warp merge) and evaluated per thread of the role with Python integers. `test_cuda_layouts` checks the
fragment formulas for a warp index it chooses itself; this checks the warp index the kernel really computes.

Regression (results/h200-2026-12-02/s5-call1/costdata/gpu_time_variants.json): on sm_90a the warp index was
reduced modulo a warpgroup, so warps 4..7 of an 8-warp mma.sync role redid the rows of warps 0..3 and rows
BN/2.. of `ids` were never written: 35 WARPS=8 variants of the plain assigns gave wrong ids on the H200.
"""

from __future__ import annotations

import ast
import functools
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from types import CodeType

import pytest
from cake.ir.parser import parse
from cake.ir.transforms.bind_params import bind_params
from cake.lowering.cuda.program import generate

from cake.arch import THREADS_PER_WARP, mma_sync_warp_grid
from tests.lowering.cuda.cuda_cases import REPO

# C integer arithmetic the generator writes into indices and guards (operands are non-negative there, so C's
# `/` is Python's `//`); anything else in an extracted expression means the extraction went wrong.
_ALLOWED = (ast.Expression, ast.BinOp, ast.BoolOp, ast.Compare, ast.Name, ast.Load, ast.Constant, ast.Add,
            ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.And, ast.Eq, ast.NotEq, ast.Lt)


@functools.cache
def _compiled(expr: str) -> CodeType:
    py = expr.replace("static_cast<int>(threadIdx.x)", "tid").replace("&&", " and ").replace("/", "//")
    tree = ast.parse(py.strip(), mode="eval")
    odd = [type(n).__name__ for n in ast.walk(tree) if not isinstance(n, _ALLOWED)]
    assert not odd, f"unexpected C ({', '.join(odd)}) in `{expr}`"
    return compile(tree, "<generated C>", "eval")


def c_int(expr: str, **names: int) -> int:
    return int(eval(_compiled(expr), {"__builtins__": {}}, names))  # noqa: S307 -- checked generated arithmetic


def c_args(text: str, start: int) -> list[str]:
    """The comma-separated arguments of the call whose `(` is at text[start]."""
    depth, args, cur = 0, [], ""
    for ch in text[start:]:
        if ch == "(":
            depth += 1
            if depth == 1:
                continue
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return [*args, cur.strip()]
        elif ch == "," and depth == 1:
            args.append(cur.strip())
            cur = ""
            continue
        cur += ch
    raise AssertionError("unbalanced call")


@dataclass(frozen=True)
class Frag:
    """The generated fragment struct of one mma result, as Python functions."""

    regs: int
    rows: int  # row slots per thread
    cols: int  # column slots per thread
    row_slot: Callable[[int], int]
    col_slot: Callable[[int], int]
    row: Callable[[int, int, int], int]
    col: Callable[[int, int, int], int]


def frag_struct(source: str, name: str) -> Frag:
    body = re.search(rf"struct {name} \{{(.*?)\n\}};", source, re.S)
    assert body, f"struct {name} not found"
    text = body.group(1)
    regs, rows, cols = (int(v) for v in re.search(r"kRegs = (\d+), kRows = (\d+), kCols = (\d+);", text).groups())

    def fn(fname: str, params: tuple[str, ...]) -> Callable[..., int]:
        m = re.search(rf"static (?:constexpr )?int {fname}\([^)]*\) \{{\s*return (?:\(void\)warp, )?(.*?);\s*\}}",
                      text, re.S)
        assert m, f"{name}::{fname} not found"
        expr = m.group(1)
        return lambda *vals: c_int(expr, **dict(zip(params, vals, strict=True)))

    return Frag(regs, rows, cols, fn("row_slot", ("r",)), fn("col_slot", ("r",)),
                fn("row", ("q", "warp", "lane")), fn("col", ("p", "warp", "lane")))


@dataclass(frozen=True)
class Thread:
    tid: int  # threadIdx.x
    wq: int  # the kernel's `cake_wq`
    lane: int


def role_threads(kernel: str, role: str = r"\w+") -> list[Thread]:
    """Every thread of role `role` (the kernel's only role by default), with the warp index its prologue
    computes."""
    found = list(re.finditer(rf"// role {role}(?:\[[^\]]*\])?: .*threads (\d+)\.\.(\d+)", kernel))
    assert len(found) == 1, f"one role `{role}` expected, found {len(found)}"
    first, last = (int(v) for v in found[0].groups())
    body = kernel[found[0].end():]
    rtid = re.search(r"const int cake_rtid = (.*?);", body).group(1)
    rwarp = re.search(r"const int cake_rwarp = (.*?);", body).group(1)
    wq = re.search(r"const int cake_wq = (.*?);", body).group(1)
    assert "const int cake_lane = cake_lane_id();" in body
    out = []
    for tid in range(first, last + 1):
        r = c_int(rtid, tid=tid)
        w = c_int(rwarp, cake_rtid=r)
        out.append(Thread(tid, c_int(wq, cake_rwarp=w), tid % THREADS_PER_WARP))
    return out


def check_mma_role(source: str, tile: tuple[int, int]) -> list[str]:
    """What is wrong with the warp indexing of the one mma.sync role of `source` (empty: nothing)."""
    problems: list[str] = []
    kernels = [k[:k.index("\n}\n")] for k in source.split('extern "C" __global__')[1:]]
    kernel = next(k for k in kernels if "cake_mma_sync_" in k)
    fname = re.search(r"(Frag_\w+)::row\(", kernel).group(1)
    frag = frag_struct(source, fname)
    threads = role_threads(kernel)
    rows, cols = tile

    # 1. The accumulator fragments of all threads cover the tile once.
    seen = Counter((frag.row(frag.row_slot(r), t.wq, t.lane), frag.col(frag.col_slot(r), t.wq, t.lane))
                   for t in threads for r in range(frag.regs))
    want = {(i, j) for i in range(rows) for j in range(cols)}
    if set(seen) != want or set(seen.values()) != {1}:
        missing = sorted({i for i, _ in want - set(seen)})
        twice = sorted({i for (i, _), n in seen.items() if n > 1})
        problems.append(f"accumulator: rows never computed {missing[:4]}.. ({len(missing)}), "
                        f"rows computed more than once {twice[:4]}.. ({len(twice)})")

    # 2. The A rows a thread's ldmatrix fetches are the rows its fragment says it holds: accumulator row g
    # (g + 8) of 16-row block mb comes from the address lane g (8 + g) gives for that block.
    a_call = re.search(r"cake_ldmatrix_x4\((?:\w+_af\[cake_kk\]\[cake_mb\]|cake_af\[cake_mb\]), [^;]*?\b\w+_off(\()",
                       kernel)
    a_row = c_args(kernel, a_call.start(1))[0]
    for t in threads:
        for q in range(frag.rows):
            mb, half = divmod(q, 2)
            fetched = c_int(a_row, cake_wq=t.wq, cake_mb=mb, cake_lane=t.lane // 4 + 8 * half)
            if fetched != frag.row(q, t.wq, t.lane):
                problems.append(f"A operand: warp {t.wq} lane {t.lane} slot {q} holds row "
                                f"{frag.row(q, t.wq, t.lane)} but multiplies row {fetched}")
                break

    # 3. The B columns: column n of 8-column block 2*np + h comes from the address lane 16*h + n gives
    # (ldmatrix), or from the row of 8 columns lane 16*h addresses (ldmatrix.trans).
    b_call = re.search(r"cake_ldmatrix_x4(_trans)?\(cake_bf, [^;]*?\b\w+_off(\()", kernel)
    b_args = c_args(kernel, b_call.start(2))
    for t in threads:
        for p in range(frag.cols):
            block, n = p // 2, 2 * (t.lane % 4) + p % 2
            np_, half = divmod(block, 2)
            if b_call.group(1):
                fetched = c_int(b_args[1], cake_wq=t.wq, cake_np=np_, cake_lane=16 * half, cake_kk=0) + n
            else:
                fetched = c_int(b_args[0], cake_wq=t.wq, cake_np=np_, cake_lane=16 * half + n)
            if fetched != frag.col(p, t.wq, t.lane):
                problems.append(f"B operand: warp {t.wq} lane {t.lane} slot {p} holds column "
                                f"{frag.col(p, t.wq, t.lane)} but multiplies column {fetched}")
                break

    # 4. A row-vector store has one writer per row.
    for store in re.finditer(r"// @L\d+:\d+ store -> \w+\n\s*if \((.*)\) \{\n(.*?)\n", kernel):
        block = kernel[store.end():store.end() + 600]
        if f"{fname}::row(cake_q" not in block or "::col(" in block:
            continue
        lead = store.group(1)
        writes = Counter(frag.row(q, t.wq, t.lane) for t in threads
                         if c_int(lead, cake_wq=t.wq, cake_lane=t.lane) for q in range(frag.rows))
        if set(writes) != set(range(rows)) or set(writes.values()) != {1}:
            missing = sorted(set(range(rows)) - set(writes))
            problems.append(f"store: rows never written {missing[:4]}.. ({len(missing)}), "
                            f"rows written twice {sorted(r for r, n in writes.items() if n > 1)[:4]}..")

    # 5. Warps that split the columns each publish their partial row results into their own slot.
    for part in re.finditer(r"(\w+_parts)\[(.+?) \* (\d+) \+ cake_row\] = ", kernel):
        slot, stride = part.group(2), int(part.group(3))
        cells = Counter((c_int(slot, cake_wq=t.wq), frag.row(q, t.wq, t.lane)) for t in threads
                        if t.lane % 4 == 0 for q in range(frag.rows))
        parts = len({s for s, _ in cells})
        if stride != rows or set(cells.values()) != {1} or len(cells) != parts * rows:
            problems.append(f"merge `{part.group(1)}`: {len(cells)} distinct (warp slot, row) cells written for "
                            f"{parts} x {rows}, some {max(cells.values())} times")
    return problems


def cases() -> list[tuple[str, str, dict[str, int], tuple[str, str]]]:
    """(schedule, arch, params, (tile rows param, tile cols param)) for each warp count and tile the checker's
    warp split (E0614, `mma_sync_warp_grid`) admits."""
    out = []
    plain = ("experiments/kmeans/assign_plain.cake", "experiments/kmeans/assign_plain_norms.cake")
    for rel in plain:
        for arch in ("sm_80", "sm_90a", "sm_100a"):
            for warps in (2, 4, 8):
                for bn in (32, 64, 128, 256):
                    out.append((rel, arch, {"WARPS": warps, "BN": bn, "BK": 64}, ("BN", "BK")))
    for arch in ("sm_80", "sm_90a"):
        for warps in (4, 8):
            out.append(("experiments/kmeans/assign_cp_async.cake", arch, {"WARPS": warps}, ("BN", "BK")))
    for warps in (2, 4, 8):
        for bm, bn in ((32, 128), (64, 64), (128, 128), (256, 64)):
            out.append(("experiments/starter/matmul.cake", "sm_90a", {"WARPS": warps, "BM": bm, "BN": bn},
                        ("BM", "BN")))
    return out


def _bound(rel: str, params: dict[str, int]):  # type: ignore[no-untyped-def]
    kernel = parse((REPO / rel).read_text(), rel)
    return bind_params(kernel, params, file=rel)


@pytest.mark.parametrize(("rel", "arch", "params", "tile"), cases(),
                         ids=lambda v: v if isinstance(v, str) else
                         "-".join(f"{k}{x}" for k, x in v.items()) if isinstance(v, dict) else "")
def test_every_warp_owns_its_share_of_the_mma_tile(rel: str, arch: str, params: dict[str, int],
                                                   tile: tuple[str, str]) -> None:
    kernel = _bound(rel, params)
    values = {p.name: int(p.default) for p in kernel.params}
    rows, cols = values[tile[0]], values[tile[1]]
    assert mma_sync_warp_grid(rows, cols, values["WARPS"]) is not None, "a case the checker refuses (E0614)"
    source = generate(kernel, arch, file=rel).source
    assert check_mma_role(source, (rows, cols)) == []


def test_the_check_finds_the_warpgroup_modulo_bug() -> None:
    """The H200 failure, replayed on the text: an 8-warp role whose warp index wraps at a warpgroup."""
    rel = "experiments/kmeans/assign_plain.cake"
    for bn, params in ((128, {"WARPS": 8}), (32, {"WARPS": 8, "BN": 32})):
        source = generate(_bound(rel, params), "sm_90a", file=rel).source
        line = "const int cake_wq = cake_rwarp;"
        assert source.count(line) == 1
        broken = source.replace(line, "const int cake_wq = cake_rwarp % 4;")
        problems = check_mma_role(broken, (bn, 64))
        assert any(p.startswith(f"store: rows never written [{bn // 2}") for p in problems), problems
        assert any(p.startswith("accumulator: rows never computed") for p in problems), problems


TCGEN05 = "experiments/kmeans/assign_tcgen05.cake"
TCGEN05_CONSUMER = "role consumer[w in 2]: warpgroups 1 {"


@pytest.mark.parametrize(("rel", "arch", "edit"), [
    ("experiments/kmeans/assign_pingpong.cake", "sm_90a", None),
    ("experiments/kmeans/assign_pingpong_x2.cake", "sm_90a", None),
    (TCGEN05, "sm_100a", None),
    (TCGEN05, "sm_100a", (TCGEN05_CONSUMER, "role consumer[w in 2]: warps 4 {")),
], ids=["pingpong", "pingpong_x2", "tcgen05", "tcgen05-warps4"])
def test_a_warpgroup_consumer_sees_its_hardware_warp_rank(rel: str, arch: str, edit: tuple[str, str] | None) -> None:
    """wgmma is issued by a hardware warpgroup and tcgen05.ld lets a warp reach only the TMEM lanes of its rank
    in its warpgroup (32 x (warp id % 4) onwards); the generated fragments and TMEM addresses use `cake_wq`.
    So every consumer thread's cake_wq must be its hardware warp's rank. A `warps 4` TMEM reader declared
    after two 1-warp roles used to start at thread 64 (ranks 2, 3, 0, 1 against cake_wq 0..3): the plan now
    starts every TMEM reader on a warpgroup boundary, as it does warpgroup roles."""
    text = (REPO / rel).read_text()
    if edit is not None:
        assert text.count(edit[0]) == 1
        text = text.replace(*edit)
    source = generate(parse(text, rel), arch, file=rel).source
    kernel = next(k for k in source.split('extern "C" __global__')[1:] if "// role consumer" in k)
    assert "cake_wgmma_" in kernel or "(static_cast<uint32_t>(cake_wq * 32) << 16)" in kernel
    threads = role_threads(kernel, "consumer")
    assert len(threads) == 256
    assert all(t.wq == (t.tid // THREADS_PER_WARP) % 4 for t in threads)
