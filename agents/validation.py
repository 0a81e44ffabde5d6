"""Parse and statically check a candidate's text: the one function every agent and the loop share.

The text is parsed, printed canonically, and the canonical text is parsed again and checked, so the
diagnostics' spans point into the text that is stored (and shown back to an LLM for repair).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from cake.agents.base import Checked, Validate
from cake.ir.checks.registry import CheckSpec
from cake.ir.nodes import Kernel
from cake.ir.parser import parse_diagnostics
from cake.ir.printer import print_kernel

from cake.diagnostics import Diagnostic, DiagnosticError
from cake.errors import InternalError

CANDIDATE_FILE = "candidate.cake"  # the file name diagnostics show (never a path of this machine)
# A text longer than this is not parsed at all (a schedule is a few KB; megabytes are an attack or a runaway).
MAX_TEXT_CHARS = 100_000


def too_long(text: str) -> Diagnostic:
    return Diagnostic("E0001", f"schedule text is {len(text):,} characters; the limit is {MAX_TEXT_CHARS:,}",
                      file=CANDIDATE_FILE, help="write one schedule of a few kilobytes")


def make_validator(arch: str, backend: str | None,
                   rules: Callable[[], Sequence[CheckSpec]] | None = None, *,
                   dims: Mapping[str, int] | None = None) -> Validate:
    """A `Validate` that checks for `arch` (None: each schedule's own target) and `backend`, with the
    learned rules `rules()` returns at each call (they grow between turns), and `dims` bound so that budgets
    depending on them (shared memory of a [BN, D] tile) are proven at the shape that matters."""
    from cake.ir.check import check

    def validate(text: str) -> Checked:
        if len(text) > MAX_TEXT_CHARS:
            return Checked(text[:MAX_TEXT_CHARS], None, (too_long(text),))
        kernel, diagnostics = parse_diagnostics(text, CANDIDATE_FILE)
        if kernel is None:
            return Checked(text, None, tuple(diagnostics))
        canonical = print_kernel(kernel)
        reparsed, again = parse_diagnostics(canonical, CANDIDATE_FILE)
        if reparsed is None:  # the printer's round trip is the IR's invariant; a break is its bug
            raise InternalError("printer round trip", f"the canonical text does not parse: {again}", canonical)
        learned = tuple(rules()) if rules is not None else ()
        found = tuple(check(reparsed, arch=arch, backend=backend, rules=learned, dims=dims, file=CANDIDATE_FILE))
        if backend is not None and not any(d.is_error for d in found):
            found += lowering_refusals(reparsed, arch, backend)
        return Checked(canonical, reparsed, found)

    return validate


def lowering_refusals(kernel: Kernel, arch: str, backend: str) -> tuple[Diagnostic, ...]:
    """What the backend's lowering refuses in a schedule the checker accepted (e.g. a param default outside
    its domain), found by lowering it to source — no compiler runs — so no evaluation is spent on it."""
    from cake.lowering.runtime import lower

    try:
        lower(kernel, backend, arch=arch, filename=CANDIDATE_FILE)
    except DiagnosticError as error:
        return error.diagnostics
    return ()
