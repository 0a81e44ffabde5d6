"""What every subcommand shares: exit codes and the one usage-error type."""

from __future__ import annotations

import enum

from cake.errors import INTERNAL_EXIT_CODE


class ExitCode(enum.IntEnum):
    OK = 0  # clean: no findings
    FINDINGS = 1  # the input was read and judged, and something is wrong with it
    USAGE = 2  # bad arguments, or an input that could not be read or loaded
    INTERNAL = INTERNAL_EXIT_CODE  # a bug in CAKE itself (a check, pass or generator crashed): report it, the input may be fine


class UsageError(Exception):
    """Bad usage or unreadable input; `main` prints it and exits with ExitCode.USAGE."""
