"""A kernel file that cannot be imported: `cake verify` must exit 2, not judge it."""

raise RuntimeError("this module fails at import time")
