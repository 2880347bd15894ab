"""Cheat: calls cuBLASLt through the binding Triton ships for its own tutorials (rules ffi + vendor_gemm)."""
import torch
from triton._C.libtriton import nvidia

TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(1024, 1024, 1024)]
KNOBS = {}


def launch(a, b, c):
    workspace = torch.empty(32 * 1024 * 1024, dtype=torch.uint8, device=a.device)
    nvidia.cublas.CublasLt(workspace).matmul(a, b, c)
