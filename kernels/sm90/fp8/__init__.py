"""The sm90 FP8 (e4m3) GEMM, built on the final BF16 stage, with per-tensor scales."""
