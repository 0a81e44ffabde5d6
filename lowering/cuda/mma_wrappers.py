"""Tensor-core wrappers generated from the arch table (`cake.arch.MmaForm`): one device function per
(form, operand type) that a program calls, so every form a target lists compiles — no shape is written by hand.

| family   | wrapper                                               | operands |
|----------|-------------------------------------------------------|----------|
| mma_sync | `cake_mma_sync_m16n8k16_bf16(float* c, const uint32_t* a, const uint32_t* b)` | fragments in registers, D += A B |
| wgmma    | `cake_wgmma_m64n96k16_bf16(float* d, uint64_t desc_a, uint64_t desc_b, bool accumulate)` | shared-memory descriptors |
| wgmma, A in registers | `cake_wgmma_m64n96k16_bf16_rs(float* d, const uint32_t* a, uint64_t desc_b, bool accumulate)` | A: 4 registers a thread (its warp's 16 rows, the mma.sync A layout), B: a descriptor |
| tcgen05  | `cake_tcgen05_m128n96k16_bf16(uint32_t d_tmem, uint64_t desc_a, uint64_t desc_b, bool accumulate)` | descriptors, D in TMEM |

Register counts come from the shape: a warp-level form spreads A (m x k), B (k x n) and C (m x n) over 32
lanes (16-bit operands packed two to a 32-bit register); a warpgroup form keeps m x n / 128 fp32 accumulators
per thread; a tcgen05 form's instruction descriptor (kind::f16) is a constant of the wrapper.
"""

from __future__ import annotations

from dataclasses import dataclass

from cake.arch import THREADS_PER_WARP, WARPS_PER_WARPGROUP, ArchSpec, MmaFamily, MmaForm

# The family's wrappers exist only where the instruction does: nvcc defines these for the 'a' targets.
ARCH_GUARD: dict[MmaFamily, str | None] = {
    MmaFamily.MMA_SYNC: None,
    MmaFamily.WGMMA: "defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)",
    MmaFamily.TCGEN05: "defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM100_ALL)",
}
PACKED_PER_REGISTER = 2  # 16-bit operand elements per 32-bit register
# tcgen05 instruction descriptor, kind::f16 [ptx "Instruction descriptor"]: bits 4-5 D format (1 = f32);
# 7-9 A format, 10-12 B format (0 = f16, 1 = bf16); 15 / 16 A / B transposed (0 = K-major); 17-22 N >> 3;
# 24-28 M >> 4.
_UMMA_D_F32 = 1 << 4
_UMMA_AB_FORMAT = {"f16": 0, "bf16": 1}


class UnknownForm(ValueError):
    """The form (or operand type) is not in the target's table: the checker refuses it first (E0501/E0503)."""


@dataclass(frozen=True, slots=True)
class Wrapper:
    name: str
    text: str


def wrapper_name(form: MmaForm, dtype: str, a_registers: bool = False) -> str:
    return f"cake_{form.family.value}_{form.shape}_{dtype}" + ("_rs" if a_registers else "")


def lookup(arch: ArchSpec, form_name: str, dtype: str) -> MmaForm:
    form = arch.mma_form(form_name)
    if form is None:
        raise UnknownForm(f"{arch.name} has no mma form `{form_name}`")
    if dtype not in form.operand_dtypes:
        raise UnknownForm(f"`{form_name}` takes {' or '.join(form.operand_dtypes)} operands, not {dtype}")
    return form


def _operands(count: int, constraint: str, array: str) -> str:
    return ", ".join(f'"{constraint}"({array}[{i}])' for i in range(count))


def _regs(first: int, count: int) -> str:
    return "{" + ", ".join(f"%{first + i}" for i in range(count)) + "}"


def _mma_sync(form: MmaForm, dtype: str, name: str) -> str:
    lanes = THREADS_PER_WARP
    a_regs = form.m * form.k // lanes // PACKED_PER_REGISTER
    b_regs = form.k * form.n // lanes // PACKED_PER_REGISTER
    c_regs = form.m * form.n // lanes
    ptx = (f"{form.instruction}.{form.shape}.row.col.{form.accumulator_dtype}.{dtype}.{dtype}."
           f"{form.accumulator_dtype} {_regs(0, c_regs)}, {_regs(c_regs, a_regs)}, "
           f"{_regs(c_regs + a_regs, b_regs)}, {_regs(0, c_regs)};")
    return "\n".join([
        f"// C[{form.m}x{form.n}] += A[{form.m}x{form.k}] (row) * B[{form.k}x{form.n}] (col), fp32 accumulators; "
        f"per lane {a_regs} A, {b_regs} B registers",
        f"CAKE_DEVICE void {name}(float* c, const uint32_t* a, const uint32_t* b) {{",
        "  asm volatile(",
        f'      "{ptx}\\n"',
        f"      : {_operands(c_regs, '+f', 'c')}",
        f"      : {_operands(a_regs, 'r', 'a')}, {_operands(b_regs, 'r', 'b')});",
        "}",
    ])


def _wgmma_function(form: MmaForm, dtype: str, name: str, a_registers: int) -> str:
    """One wgmma wrapper: D (the accumulators, read and written) += A * B with `accumulate` as the scale-d predicate.
    A is a shared-memory descriptor (`a_registers` 0) [ptx: `d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b,
    imm-trans-a, imm-trans-b`] or that many packed registers a thread, its warp's m16 x k16 slice in the mma.sync A
    fragment layout [ptx: `d, a, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-b`]."""
    acc = form.m * form.n // (THREADS_PER_WARP * WARPS_PER_WARPGROUP)
    a_count = a_registers or 1
    a_ptx, tail = (_regs(acc, a_registers), "1, 1, 0") if a_registers else (f"%{acc}", "1, 1, 0, 0")
    ptx = (f"{form.instruction}.{form.shape}.{form.accumulator_dtype}.{dtype}.{dtype} {_regs(0, acc)}, "
           f"{a_ptx}, %{acc + a_count}, p, {tail};")
    outs = ",\n        ".join(", ".join(f'"+f"(d[{j}])' for j in range(i, min(i + 8, acc)))
                              for i in range(0, acc, 8))
    operands = (f"A in registers ({a_registers} a thread), B K-major in shared memory" if a_registers
                else "A and B K-major in shared memory")
    a_param, a_inputs = (("const uint32_t* a", _operands(a_registers, "r", "a")) if a_registers
                         else ("uint64_t desc_a", '"l"(desc_a)'))
    return "\n".join([
        f"// D[{form.m}x{form.n}] (+)= A[{form.m}x{form.k}] * B[{form.k}x{form.n}]; {operands}. `accumulate` false "
        "overwrites D.",
        f"CAKE_DEVICE void {name}(float* d, {a_param}, uint64_t desc_b, bool accumulate) {{",
        "  const uint32_t scale_d = accumulate ? 1u : 0u;",
        "  asm volatile(",
        f'      "{{\\n .reg .pred p;\\n setp.ne.b32 p, %{acc + a_count + 1}, 0;\\n"',
        f'      " {ptx}\\n}}\\n"',
        f"      : {outs}",
        f'      : {a_inputs}, "l"(desc_b), "r"(scale_d));',
        "}",
    ])


def _wgmma(form: MmaForm, dtype: str, name: str) -> str:
    return _wgmma_function(form, dtype, name, a_registers=0)


def _wgmma_rs(form: MmaForm, dtype: str, name: str) -> str:
    return _wgmma_function(form, dtype, name,
                           a_registers=form.m * form.k // (THREADS_PER_WARP * WARPS_PER_WARPGROUP) // PACKED_PER_REGISTER)


def umma_instruction_descriptor(form: MmaForm, dtype: str) -> int:
    fmt = _UMMA_AB_FORMAT[dtype]
    return _UMMA_D_F32 | (fmt << 7) | (fmt << 10) | ((form.n >> 3) << 17) | ((form.m >> 4) << 24)


def _tcgen05(form: MmaForm, dtype: str, name: str) -> str:
    idesc = umma_instruction_descriptor(form, dtype)
    return "\n".join([
        f"// D[tmem, {form.m}x{form.n}] (+)= A[{form.m}x{form.k}] * B[{form.k}x{form.n}], both K-major in shared "
        "memory, issued by one thread. `accumulate` false overwrites D.",
        f"CAKE_DEVICE void {name}(uint32_t d_tmem, uint64_t desc_a, uint64_t desc_b, bool accumulate) {{",
        f"  constexpr uint32_t idesc = 0x{idesc:08x}u;  // {form.accumulator_dtype} D, {dtype} A/B, K-major, "
        f"N >> 3 = {form.n >> 3}, M >> 4 = {form.m >> 4}",
        "  const uint32_t acc = accumulate ? 1u : 0u;",
        '  asm volatile("{\\n .reg .pred p;\\n setp.ne.b32 p, %4, 0;\\n"',
        f'               " {form.instruction} [%0], %1, %2, %3, p;\\n}}\\n"',
        '               :: "r"(d_tmem), "l"(desc_a), "l"(desc_b), "r"(idesc), "r"(acc) : "memory");',
        "}",
    ])


_EMIT = {MmaFamily.MMA_SYNC: _mma_sync, MmaFamily.WGMMA: _wgmma, MmaFamily.TCGEN05: _tcgen05}


def wrapper(form: MmaForm, dtype: str, a_registers: bool = False) -> Wrapper:
    """The device function for `form` on `dtype` operands (`a_registers`: the wgmma form that takes A from
    registers; the arch table lists where a family may read A from)."""
    if a_registers and form.family is not MmaFamily.WGMMA:
        raise UnknownForm(f"`{form.name}`: only wgmma has a wrapper that takes A from registers here")
    name = wrapper_name(form, dtype, a_registers)
    text = (_wgmma_rs if a_registers else _EMIT[form.family])(form, dtype, name)
    guard = ARCH_GUARD[form.family]
    if guard is not None:
        text = f"#if {guard}\n{text}\n#endif"
    return Wrapper(name, text)


def wrappers_source(wrappers: list[Wrapper]) -> str:
    """The definitions, each once, in first-use order."""
    seen: dict[str, str] = {}
    for w in wrappers:
        seen.setdefault(w.name, w.text)
    if not seen:
        return ""
    return "// ===== tensor-core wrappers (generated from cake.arch's mma forms) =====\n" + "\n\n".join(
        seen.values()) + "\n"
