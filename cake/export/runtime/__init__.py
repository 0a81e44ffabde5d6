"""The runtime of an exported package: these modules are copied verbatim into every package `cake export`
writes (`package_init.py` becomes its `__init__.py`), so they import only the standard library, torch and
triton, and only relatively among themselves."""
