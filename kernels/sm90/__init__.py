"""Hopper (sm90) reference kernels: a ten-stage BF16 GEMM ladder and its FP8 variant."""
