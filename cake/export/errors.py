"""Errors of `cake export` and `cake certify`."""

from __future__ import annotations


class ExportError(Exception):
    """A schedule, run or package that cannot be exported or certified; the message says why."""
