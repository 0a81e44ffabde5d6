"""User APIs of workloads, copied as `api.py` into an exported package that holds their ops."""
