"""Names the export tests share: the kmeans schedules' folder and the exported packages' names (one per process:
a package's ops register once)."""

from __future__ import annotations

from pathlib import Path

FK = Path(__file__).resolve().parents[2] / "experiments" / "kmeans"
TRITON_PKG = "cake_test_export_triton"
TRITON_SCRATCH_PKG = "cake_test_export_triton_scratch"  # Triton kernels with scratch buffers (their out-variants' workspace)
CUDA_PKG = "cake_test_export_cuda"
