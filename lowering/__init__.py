"""Lowering: from a checked CAKE `Kernel` to backend source, and the runtime that compiles, caches and
loads it as a Python callable with the op's signature.

The public entry points live in `cake.lowering.runtime` (`lower`, `load`, `load_schedule`); backends
register in `cake.lowering.backend`. See README.md for the responsibility table.
"""
