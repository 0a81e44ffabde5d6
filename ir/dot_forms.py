"""`via dot` forms: the backend picks the instruction; an optional suffix says how fp32 operands are multiplied.

`via dot` multiplies fp32 operands at IEEE fp32 (Triton: `input_precision="ieee"`, which runs on the CUDA cores:
an fp32 `tl.dot` is FMA work, not tensor-core work). `via dot.tf32x3` lets the backend split each fp32 operand
into two TF32 parts (x = hi + lo) and multiply hi*hi + hi*lo + lo*hi on the tensor cores with an fp32
accumulator: about 2^-21 relative error per product instead of fp32's 2^-24, at three tensor-core products.
`via dot.tf32` rounds each fp32 operand to TF32 (10 mantissa bits: 2^-11 relative) for one tensor-core product:
exact for an operand that holds 16-bit values (f16 has TF32's 10 mantissa bits, bf16 7), so it multiplies an
fp32 operand by a rounded 16-bit one at the cost of one product. 16-bit operands multiply exactly whatever the suffix (the products of two f16/bf16 values
are exact in the fp32 accumulator), so the suffix only matters for fp32 operands.
"""

from __future__ import annotations

DOT = "dot"
# suffix -> what it asks of fp32 operands (the documentation the checker's diagnostics quote)
DOT_PRECISIONS: dict[str, str] = {
    "": "IEEE fp32 products",
    "tf32x3": "each operand split into two TF32 parts, three tensor-core products (about 2^-21 relative)",
    "tf32": "each operand rounded to TF32, one tensor-core product (2^-11 relative; exact for 16-bit values)",
}

# suffix -> tensor-core products (TF32, at the TF32 rate) each fp32 multiply costs; "" (IEEE) runs on the CUDA cores
TF32_PRODUCTS: dict[str, int] = {"tf32x3": 3, "tf32": 1}


def is_dot(form: str) -> bool:
    """Whether `form` is `dot` or `dot.<suffix>` (valid suffix or not: `dot_precision` judges that)."""
    return form == DOT or form.startswith(DOT + ".")


def dot_precision(form: str) -> str | None:
    """The suffix of a valid dot form ("" for plain `dot`), None when `form` is no valid dot form."""
    if form == DOT:
        return ""
    suffix = form.removeprefix(DOT + ".") if form.startswith(DOT + ".") else None
    return suffix if suffix in DOT_PRECISIONS and suffix else None


def dot_forms_help() -> str:
    return ", ".join(f"`{DOT}{'.' + s if s else ''}` ({what})" for s, what in DOT_PRECISIONS.items())
