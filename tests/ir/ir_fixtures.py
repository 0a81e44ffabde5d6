"""Every schedule text the IR tests run over: the shipped `.cake` files and the checker's examples."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def cake_files() -> list[Path]:
    """Every `.cake` file in the repository's experiments and test fixtures."""
    from cake.experiments.schedules import shipped_schedule_paths

    return sorted([*shipped_schedule_paths(), *(ROOT / "tests").rglob("*.cake")])


def fixture_texts() -> dict[str, str]:
    """name -> schedule text: the files, plus the checker's bases and known-bad examples (which must parse:
    a known-bad example is wrong in meaning, never in syntax)."""
    from cake.ir.checks.fixtures import BASES
    from cake.ir.checks.registry import all_checks

    texts = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in cake_files()}
    texts.update({f"checks/base/{name}": text for name, text in BASES.items()})
    for spec in all_checks():
        for i, example in enumerate(spec.examples):
            texts[f"checks/{spec.id}/{i}"] = example.text
    return texts
