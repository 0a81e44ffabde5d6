"""Evaluation: one typed seam between proposing kernels and judging them.

An `Evaluator` turns one `EvalJob` into one `Evaluation` (verify in an isolated worker, then, on a GPU, time
in an isolated process); an `Executor` runs evaluators over devices (in-process, a local pool, later Ray).
`bench` is the timing orchestration `cake bench`, the evaluator and the GPU scripts share.
"""
