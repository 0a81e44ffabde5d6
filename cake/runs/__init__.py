"""Runs: the run store (SQLite + artifacts), the learned-rule store, and reports drawn from a run."""
