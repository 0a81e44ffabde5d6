"""The `cake` entry point: exit codes, the arch table, and that the parser alone stays light."""

import json
import subprocess
import sys

from cake.arch import ARCHS, DEVICES, Feature, device_for
from cake.cli import main


def test_no_command_is_usage_error() -> None:
    assert main([]) == 2


def test_unknown_command_is_usage_error() -> None:
    proc = subprocess.run([sys.executable, "-m", "cake", "no-such-command"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "invalid choice" in proc.stderr


# Heavy modules only a command's run may import: `cake --help` and a bad argument must answer in a fraction of a
# second, and every `cake check` / `cake fmt` a test or a user spawns would otherwise pay torch's ~3 s import.
HEAVY_MODULES = ("torch", "triton", "numpy", "matplotlib")
PROBE = """
import contextlib, io, sys
from cake.cli import main
for argv in (["--help"], ["check", "--no-such-flag"], ["verify", "--help"]):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            main(argv)
        except SystemExit:
            pass
print(" ".join(m for m in HEAVY if m in sys.modules))
"""


def test_help_and_argument_errors_import_no_heavy_module() -> None:
    proc = subprocess.run([sys.executable, "-c", f"HEAVY = {HEAVY_MODULES!r}\n{PROBE}"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [], f"the parser imported {proc.stdout.strip()}: import it inside the command's run"


def test_arch_json_lists_every_target(capsys) -> None:
    assert main(["arch", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data["archs"]) == set(ARCHS)
    assert data["archs"]["sm_90a"]["smem_per_block_max_bytes"] == 232448


def test_arch_facts_are_consistent() -> None:
    assert ARCHS["sm_90a"].has(Feature.WGMMA) and not ARCHS["sm_90"].has(Feature.WGMMA)
    assert ARCHS["sm_100a"].has(Feature.TCGEN05) and ARCHS["sm_100a"].tmem_columns == 512
    assert not ARCHS["sm_80"].has(Feature.TMA)
    for device in DEVICES.values():
        assert device.arch in ARCHS
    assert device_for("sm_90a").name == "H200"
