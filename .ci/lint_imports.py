"""Run `lint-imports` (import-linter) on CAKE's installed layout: `python .ci/lint_imports.py`.

grimp finds a package's modules by walking its folder, but `cake.ir`, `cake.verifier`, ... live in
top-level folders that pyproject's `[tool.setuptools.package-dir]` maps under `cake`. This builds that
layout as symlinks in a temporary folder (grimp follows them) and runs lint-imports there, with the
contracts of `[tool.importlinter]` in pyproject.toml. Exit status: lint-imports'.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[1]


def stage_layout(stage: Path) -> None:
    package_dir: dict[str, str] = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"]
    root = stage / "cake"
    root.mkdir()
    for entry in (REPO / "cake").iterdir():
        (root / entry.name).symlink_to(entry)
    for package, folder in package_dir.items():
        name = package.removeprefix("cake.")
        if "." in name:
            raise SystemExit(f"package-dir maps {package}: only direct subpackages of cake are staged")
        (root / name).symlink_to(REPO / folder)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="cake-lint-imports-") as tmp:
        stage = Path(tmp)
        stage_layout(stage)
        # Run from the stage: lint-imports puts the working directory first on sys.path, and the repo root
        # holds a `cake/` folder without the mapped subpackages.
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(stage), os.environ.get("PYTHONPATH", "")])}
        command = ["lint-imports", str(REPO / "pyproject.toml"), "--no-cache", *sys.argv[1:]]
        return subprocess.run(command, cwd=stage, env=env).returncode


if __name__ == "__main__":
    raise SystemExit(main())
