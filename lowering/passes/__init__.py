"""Kernel -> Kernel passes shared by the backends; one pass per module, named after it."""
