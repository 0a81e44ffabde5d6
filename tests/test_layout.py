"""The repository's layout keeps its promises: the verifier names no workload, a wheel carries no run data,
and reading a committed run writes nothing into the tree."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
COMMITTED_RUN = REPO / "results" / "h200-2026-11-30" / "s2" / "evolve2" / "run"


def test_nothing_under_verifier_names_kmeans() -> None:
    # The verifier keeps the machinery; workloads register their ops (cake.verifier.registry).
    named = [str(p.relative_to(REPO)) for p in (REPO / "verifier").rglob("*")
             if p.is_file() and p.suffix in (".py", ".md", ".json") and "kmeans" in p.read_text().lower()]
    assert named == []


def _tree_copy(dest: Path) -> None:
    """The checkout's files (tracked and untracked, minus ignored ones), as a fresh clone would hold them."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            (dest / name).write_bytes(source.read_bytes())


def _source_packages() -> list[str]:
    """The wheel path of every `__init__.py` under the folders that install as `cake.*`."""
    mapped = {"cake": "cake", "ir": "cake/ir", "lowering": "cake/lowering", "verifier": "cake/verifier",
              "agents": "cake/agents", "experiments": "cake/experiments"}
    return [f"{prefix}/{init.relative_to(REPO / folder).as_posix()}"
            for folder, prefix in mapped.items() for init in (REPO / folder).rglob("__init__.py")
            if "generated" not in init.parts]


def test_the_wheel_carries_code_and_schedules_but_no_run_data(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    _tree_copy(tree)
    assert (tree / "results").is_dir()  # the run data is there to be left out
    subprocess.run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path / "dist")], cwd=tree, check=True, capture_output=True, timeout=300)
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    run_data = [n for n in names if n.endswith((".sqlite", ".log", ".png", ".jsonl")) or "results/" in n
                or "/candidates/" in n or n.startswith(("scripts/", "tests/"))]
    assert run_data == []
    assert "cake/experiments/kmeans/assign_plain.cake" in names and "cake/verifier/registry.py" in names
    # Every package of the tree ships: an editable install finds a package pyproject.toml forgot to list,
    # a wheel does not.
    assert sorted(set(_source_packages()) - set(names)) == []
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "[cake.workloads]" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_cake_report_on_a_committed_run_leaves_the_tree_untouched(tmp_path: Path) -> None:
    assert (COMMITTED_RUN / "run.sqlite").is_file()
    before = sorted(p.name for p in COMMITTED_RUN.iterdir())
    proc = subprocess.run([sys.executable, "-m", "cake", "report", str(COMMITTED_RUN), "--json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and '"best_series"' in proc.stdout, proc.stderr[-2000:]
    assert sorted(p.name for p in COMMITTED_RUN.iterdir()) == before  # no run.sqlite-wal / -shm
    status = subprocess.run(["git", "status", "--porcelain", "--", str(COMMITTED_RUN)], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout
    assert status == ""


def test_a_committed_run_opened_read_only_refuses_writes() -> None:
    import sqlite3

    from cake.runs.store import RunStore

    with RunStore.open_read_only(COMMITTED_RUN) as store, pytest.raises(sqlite3.OperationalError):
        store.set_meta("touched", "yes")


def test_every_committed_run_store_holds_its_run() -> None:
    # a run copied while its evaluations sat in its write-ahead log (`run.sqlite-wal`, ignored by git) is committed as
    # an empty database; checkpoint a run (or let its process exit) before copying it into results/
    listed = subprocess.run(["git", "ls-files", "-z", "results"], cwd=REPO, capture_output=True,
                            check=True).stdout.decode().split("\0")
    stores = [REPO / name for name in listed if name.endswith("/run.sqlite")]
    assert stores, "the committed results hold run stores"
    from cake.runs.store import NotARunError, RunStore

    empty = []
    for db in stores:
        try:
            RunStore.open_read_only(db.parent).close()
        except NotARunError:
            empty.append(str(db.relative_to(REPO)))
    assert empty == []
