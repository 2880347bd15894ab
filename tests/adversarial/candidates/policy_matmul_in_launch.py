"""Cheat: hands the GEMM to cuBLAS through torch.matmul inside launch (rule vendor_gemm)."""
import torch

TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(1024, 1024, 1024)]
KNOBS = {}


def launch(a, b, c):
    torch.matmul(a, b.t(), out=c)
