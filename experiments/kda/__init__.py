"""The KDA workload: Kimi Delta Attention forward (see `workload.py`)."""
