"""Malformed input never raises anything but diagnostics: random text and mutated fixtures.

A small CI budget (~200 examples); scripts/bench_parser_fuzz.py runs >= 10,000 cases.
"""

from __future__ import annotations

import re

from cake.ir import nodes as n
from cake.ir.parser import keywords, parse, parse_diagnostics
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ir_fixtures import fixture_texts

from cake.diagnostics import DiagnosticError, render_all

# Comments are dropped so that joining tokens on one line does not comment out the rest of the file.
SOURCES = sorted(re.sub(r"#[^\n]*", "", text) for text in fixture_texts().values())
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?|->|\.\.|//|[<>=!]=|\S")
VOCABULARY = sorted(keywords()) + ["->", "..", ".", ",", ":", ";", "[", "]", "(", ")", "{", "}", "+", "-", "*",
                                   "//", "<", "==", "=", "!", "&", "|", "0", "128", "1.5e3", "x", "\n", "# c\n"]
PARSE_CODES = {"E0001", "E0002", "E0003", "E0004", "E0005"}


def _check(text: str) -> None:
    kernel, diagnostics = parse_diagnostics(text, "fuzz.cake")
    if kernel is None:
        assert diagnostics and {d.code for d in diagnostics} <= PARSE_CODES
        rendered = render_all(diagnostics, text)
        assert "fuzz.cake:" in rendered and "Traceback" not in rendered
    else:
        assert isinstance(kernel, n.Kernel) and diagnostics == ()
    try:
        parse(text, "fuzz.cake")
    except DiagnosticError as error:
        assert error.diagnostics == diagnostics


@settings(max_examples=80, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=200)
       | st.lists(st.sampled_from(VOCABULARY), max_size=60).map(" ".join))
def test_random_text(text: str) -> None:
    _check(text)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    tokens = _TOKEN.findall(draw(st.sampled_from(SOURCES)))
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.integers(0, len(tokens)))
        kind = draw(st.sampled_from(("delete", "insert", "swap", "duplicate")))
        if kind == "delete" and tokens:
            del tokens[min(where, len(tokens) - 1): where + draw(st.integers(1, 4))]
        elif kind == "insert":
            tokens.insert(where, draw(st.sampled_from(VOCABULARY)))
        elif kind == "swap" and len(tokens) > 1:
            other = draw(st.integers(0, len(tokens) - 1))
            i = min(where, len(tokens) - 1)
            tokens[i], tokens[other] = tokens[other], tokens[i]
        elif kind == "duplicate" and tokens:
            i = min(where, len(tokens) - 1)
            tokens.insert(i, tokens[i])
    return " ".join(tokens)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_fixtures(text: str) -> None:
    _check(text)
