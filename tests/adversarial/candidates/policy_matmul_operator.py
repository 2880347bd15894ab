"""Cheat: the @ operator, which is torch.matmul in disguise (rule vendor_gemm)."""
import torch

TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(1024, 1024, 1024)]
KNOBS = {}


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor):
    c.copy_(a @ b.T)
