"""Generated CUDA C++ (no compiler needed): golden snippets with stable names, what codegen derives from the
schedule (barrier counts, transaction bytes, named barriers, argument offsets), and the diagnostics it
raises when a commitment disagrees or a construct cannot be lowered."""

from __future__ import annotations

import pytest
from cake.ir.check import check
from cake.ir.parser import parse
from cake.ir.printer import print_kernel
from cake.lowering.cuda.errors import CheckerGap, LoweringError
from cake.lowering.cuda.program import generate
from cuda_cases import CUDA_REFUSED, GOLDEN, edited, program, read

from cake.diagnostics import DiagnosticError, render

PINGPONG = "experiments/kmeans/assign_pingpong.cake"
CP_ASYNC = "experiments/kmeans/assign_cp_async.cake"
TCGEN05 = "experiments/kmeans/assign_tcgen05.cake"
COOP = "experiments/kmeans/assign_pingpong_coop.cake"


def normalized(source: str) -> str:
    return "\n".join(line.strip() for line in source.splitlines())


@pytest.mark.parametrize(("rel", "golden"), [(PINGPONG, "assign_pingpong.sm_90a.snippets"),
                                             (CP_ASYNC, "assign_cp_async.sm_80.snippets"),
                                             (TCGEN05, "assign_tcgen05.sm_100a.snippets")])
def test_golden_snippets(rel: str, golden: str) -> None:
    source = normalized(program(rel).source)
    for snippet in (GOLDEN / golden).read_text().strip().split("\n----\n"):
        assert snippet.strip() in source, f"snippet missing from {rel}:\n{snippet}"


def test_generation_is_deterministic() -> None:
    kernel, _ = read(PINGPONG)
    assert generate(kernel, "sm_90a").source == generate(kernel, "sm_90a").source


def test_pingpong_derivations() -> None:
    prog = program(PINGPONG)
    assign = prog.launch("assign")
    assert assign.kname == "assign_pingpong_assign" and assign.threads == 384 and assign.persistent
    assert assign.regs_cap == 168
    # TMA descriptors travel first in the argument block, 128 bytes each at 64-byte alignment.
    tmaps = [f for f in assign.args if f.kind == "tmap"]
    assert [(f.name, f.offset, f.tma.box, f.tma.swizzle_bytes) for f in tmaps] == [  # type: ignore[union-attr]
        ("tmap_x", 0, (64, 128, 1), 128), ("tmap_c", 128, (64, 128, 1), 128), ("tmap_csq_g", 256, (128, 1), 0)]
    assert assign.args_size % 64 == 0
    src = prog.source
    assert "static_assert(offsetof(assign_pingpong_assign_args, x) == 384" in src
    # 2 x 32 KB of points + 4 stages x (32 KB + 512 B) + barriers, then the 1 KB alignment slack.
    assert assign.smem_bytes == 198752 + 1024
    assert "uint32_t c_full_phase = 0u;" in src and "uint32_t c_empty_phase = 0xffffffffu;" in src


def test_a_held_wgmma_a_operand_is_read_once_and_taken_from_registers() -> None:
    # `let xa = xs[w]` before the k loop: one ldmatrix per 16 x 16 block of each warp's rows (8 k-steps x 2
    # 64-row blocks), and every wgmma takes those registers (the `_rs` wrapper), reading only B from shared memory.
    src = program("experiments/kmeans/assign_pingpong_rs.cake").source
    assert "uint32_t xa_af[8][2][4];" in src and src.count("cake_ldmatrix_x4(xa_af[cake_kk][cake_mb]") == 1
    # generic-proxy reads of a stage a TMA refills: fenced before the release that lets the refill in
    held = src.index("cake_ldmatrix_x4(xa_af[cake_kk][cake_mb]")
    assert src.index("cake_fence_proxy_async();", held) < src.index("cake_mbar_arrive(&x_empty[w])", held)
    assert "cake_wgmma_m64n128k16_bf16_rs(&dot[" in src and "xa_af[cake_kk][cake_mb]," in src
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0" in src and "}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;" in src
    assert "const uint32_t cake_ka" not in src  # no A descriptor
    assert "cake_wgmma_desc((cs + s * 32768) + cake_kb" in src


def test_a_let_of_a_stage_read_other_than_as_wgmma_a_stays_the_stage() -> None:
    # A second use (an elementwise read) keeps the plain stage: the held fragments are the mma's alone.
    kernel, _ = edited("experiments/kmeans/assign_pingpong_rs.cake", "    let best: f32[BN] = inf",
                       "    let xsum: f32[BN] = sum(cast(xa, f32), axis=1)\n    let best: f32[BN] = xsum * 0 + inf")
    src = generate(kernel, "sm_90a", static_dims={"D": 128}).source
    assert "xa_af" not in src and "_rs(&dot" not in src


def test_fused_launch_is_one_cooperative_kernel() -> None:
    """`fuse centroid_norms into assign`: one kernel, the norm blocks grid-stride on the assign's first 256
    threads before a grid-wide barrier, and a launch-wide sync inside them a named barrier (not __syncthreads,
    which the other 128 threads never reach)."""
    prog = program(COOP)
    two = program(PINGPONG)
    assert [c.launch for c in prog.launches] == ["assign"] and prog.launch("assign").cooperative
    assert not any(c.cooperative for c in two.launches)
    assert prog.launch("assign").threads == two.launch("assign").threads == 384
    src = prog.source.split("namespace cake_assign_pingpong_coop")[1]
    norms, _, rest = src.partition("cake_grid_sync();")
    assert "for (int cake_t = blockIdx.x; cake_t < (cake_cdiv(K, 256)) * (B); cake_t += gridDim.x)" in norms
    assert "if (threadIdx.x < 256) {  // role main" in norms and "__syncthreads" not in norms.split("role main")[1]
    assert "cake_setmaxnreg_dec<40>();" in rest  # the ping-pong's roles come after the barrier
    assert "#include <cooperative_groups.h>" in prog.source and "cooperative_groups" not in two.source
    text = (GOLDEN.parents[3] / COOP).read_text().replace("    store sum(cf * cf, axis=1)", "    sync\n    store sum(cf * cf, axis=1)")
    synced = generate(parse(text, COOP), "sm_90a").source.split("cake_grid_sync();")[0]
    assert "cake_named_bar_sync(" in synced.split("role main")[1] and ", 256);" in synced.split("role main")[1]


def test_a_fusion_naming_no_launch_is_a_checker_gap() -> None:
    """E0412 refuses it; lowering it unchecked must not drop the fused launch's work silently."""
    text = (GOLDEN.parents[3] / COOP).read_text().replace("fuse centroid_norms into assign", "fuse centroid_norms into asign")
    with pytest.raises(CheckerGap, match="naming a launch the schedule lacks"):
        generate(parse(text, COOP), "sm_90a")


def test_sm80_schedule_runs_on_its_own_features() -> None:
    src = program(CP_ASYNC).source
    assert "wgmma" not in src.split("namespace cake_assign_cp_async")[1]
    assert "cake_cp_async_wait<1>();" in src  # 3 stages: this iteration's group, one still in flight
    assert "__launch_bounds__(256)" in src


def test_wrong_phase_is_lowered_as_written() -> None:
    kernel, _ = read(PINGPONG)
    text = (GOLDEN.parents[3] / PINGPONG).read_text().replace("      wait c_empty[s]\n",
                                                               "      wait c_empty[s] phase 0\n")
    src = generate(parse(text, PINGPONG), "sm_90a").source
    assert "cake_mbar_wait(&c_empty[s], 0u);" in src
    assert kernel is not None


def test_cake_lower_default_specialization_header() -> None:
    src = program(PINGPONG).source
    assert src.startswith("// Generated by CAKE from schedule `assign_pingpong`")
    assert "Specialization: T = bf16, D = 128; params: BN = 128, BK = 128, STAGES = 4" in src
    assert '#include "cake_' not in src  # helpers are inlined: the file stands alone


# ------------------------------------------------------------------------------------------- diagnostics

def lower_error(rel: str, old: str, new: str, arch: str | None = None) -> tuple[list, str]:  # type: ignore[type-arg]
    text = (GOLDEN.parents[3] / rel).read_text()
    assert text.count(old) == 1, old
    changed = text.replace(old, new)
    kernel = parse(changed, rel)
    with pytest.raises(LoweringError) as caught:
        generate(kernel, arch or kernel.target, file=rel)
    return list(caught.value.diagnostics), changed


def checker_gap(rel: str, old: str, new: str) -> tuple[tuple, str]:  # type: ignore[type-arg]
    """The checker's refusal of an edited schedule, after asserting codegen treats it as an invariant."""
    text = (GOLDEN.parents[3] / rel).read_text()
    assert text.count(old) == 1, old
    changed = text.replace(old, new)
    kernel = parse(changed, rel)
    with pytest.raises(CheckerGap, match=r"internal error in CAKE \(CUDA generator\): the checker accepted"):
        generate(kernel, kernel.target, file=rel)
    return tuple(d for d in check(kernel, backend="cuda", dims={"D": 128}, file=rel) if d.is_error), changed


def test_tx_bytes_disagreeing_with_the_boxes() -> None:
    """The checker refuses the commitment (E0403, located); codegen's own count is an invariant."""
    diags, text = checker_gap(PINGPONG, "tx BK*D*sizeof(T) + BK*4", "tx BK*D*sizeof(T)")
    assert [d.code for d in diags] == ["E0403"]
    d = diags[0]
    assert d.span is not None and d.span.line == 33
    assert "declared 32,768, but the TMA copies that signal it move 33,280" in d.message
    rendered = render(d, text)
    assert "assign_pingpong.cake:33:" in rendered and "/work" not in rendered.replace("experiments/kmeans", "")


def test_arrivals_disagreeing_with_the_roles() -> None:
    diags, _ = checker_gap(PINGPONG, "mbarrier c_empty[STAGES] arrivals 2 free", "mbarrier c_empty[STAGES] arrivals 3 free")
    assert [d.code for d in diags] == ["E0402"] and diags[0].span is not None and diags[0].span.line == 34
    assert "declared 3, but 2 arrive per phase" in diags[0].message


def test_wgmma_needs_one_warpgroup_per_instance() -> None:
    diags, _ = lower_error(PINGPONG, "role consumer[w in 2]: warpgroups 1, regs 232", "role consumer[w in 2]: warps 8, regs 232")
    assert any(d.code == "C0101" and "one warpgroup" in d.message for d in diags)


def test_tma_refused_before_sm90() -> None:
    diags, _ = lower_error(PINGPONG, "target sm_90a", "target sm_80")
    assert any(d.code == "C0100" and "TMA copies need sm_90" in d.message for d in diags)


def test_unlowerable_expression_is_a_located_diagnostic() -> None:
    diags, _ = lower_error(CP_ASYNC, "let csq: f32[BK] = sum(cf * cf, axis=1)", "let csq: f32[BK] = sum((cf * cf).T, axis=0)")
    d = diags[0]
    assert d.code == "C0100" and "`.T`" in d.message and d.span is not None and d.span.line == 33
    assert isinstance(LoweringError(diags), DiagnosticError)


def test_unknown_mma_form() -> None:
    diags, _ = lower_error(CP_ASYNC, "via mma_sync.m16n8k16", "via mma_sync.m16n8k8")
    assert any(d.code == "C0101" for d in diags)


def test_static_d_not_a_multiple_of_the_k_step() -> None:
    """D = 33: tiles pad to 48 columns, zero-filled by their copies; the mma runs 3 k-steps; TMA boxes are
    whole 128-byte rows (16 KB per 128-point tile) while the commitment is checked in tile bytes."""
    kernel, _ = read(PINGPONG)
    src = generate(kernel, "sm_90a", static_dims={"D": 33}).source
    assert "for (int cake_kk = 0; cake_kk < 3; ++cake_kk)" in src
    assert "cake_mbar_arrive_expect_tx(&x_full[w], 16384u);" in src
    cp_kernel, _ = read(CP_ASYNC)
    cp = generate(cp_kernel, "sm_80", static_dims={"D": 33}).source
    assert "// zero the 15 padding column(s) an mma's last k-step reads" in cp


def test_too_large_static_d_is_refused_with_the_budget() -> None:
    kernel, _ = read(PINGPONG)
    with pytest.raises(LoweringError) as caught:
        generate(kernel, "sm_90a", static_dims={"D": 1031})
    d = caught.value.diagnostics[0]
    assert d.code == "C0301" and "shared memory" in d.message and "> 232,448 on sm_90a" in d.message


def test_rows_shared_by_warps_merge_through_shared_memory() -> None:
    """BN = 32 over 8 warps: warps split the columns (2 x 4 warps); row results merge across them in column
    order, and only one warp of each row group stores."""
    text = (GOLDEN.parents[3] / "experiments/kmeans/assign_plain.cake").read_text()
    kernel = parse(text.replace("param BN = 128", "param BN = 32").replace("param WARPS = 4", "param WARPS = 8"), "p")
    src = generate(kernel, "sm_80").source
    assert "4 warps share each row: merge their partial results through shared memory" in src
    assert "cake_argmin_merge(m_v[cake_q], m_i[cake_q], m_v_parts[cake_j * 32 + cake_row]" in src
    assert "if (cake_wq % 4 == 0 && cake_lane % 4 == 0) {" in src


@pytest.mark.parametrize(("rel", "code"), sorted(CUDA_REFUSED.items()))
def test_shipped_schedules_the_backend_refuses_get_a_located_diagnostic(rel: str, code: str) -> None:
    with pytest.raises(LoweringError) as refused:
        program(rel)
    first = refused.value.diagnostics[0]
    assert first.code == code and first.span is not None, render(refused.value.diagnostics)


@pytest.mark.parametrize("bk", [8, 24, 48, 136])
def test_every_stage_address_is_tma_aligned(bk: int) -> None:
    """A stage of `csq: f32[BK]` is 4*BK bytes; its stages must still start 128 bytes apart (the plan's stage),
    or the TMA into stage 1 faults with a misaligned address (the H200 did, for every BK not a multiple of 32)."""
    import re

    kernel, _ = read(PINGPONG)
    source = parse(
        print_kernel(kernel).replace("wgmma.m64n128k16", f"wgmma.m64n{bk}k16")
        .replace("param BK = 128 in {64, 128, 256}", f"param BK = {bk} in {{{bk}}}"), "pp.cake")
    strides = {int(m) for m in re.findall(r"\(\w+ \+ s \* (\d+)\)", generate(source, "sm_90a").source)}
    assert strides and all(stride % 128 == 0 for stride in strides), strides
