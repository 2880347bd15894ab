"""Cheat: fetches torch.matmul by name so no call site spells it (rule vendor_gemm)."""
import torch

TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(1024, 1024, 1024)]
KNOBS = {}

_FAST = getattr(torch, "matmul")  # noqa: B009 - the indirection is the cheat under test


def launch(a, b, c):
    c.copy_(_FAST(a, b.t()))
