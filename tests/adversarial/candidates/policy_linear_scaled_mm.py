"""Cheat: F.linear and torch._scaled_mm, the vendor GEMM under other names (rule vendor_gemm)."""
import torch
import torch.nn.functional as F

TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(1024, 1024, 1024)]
KNOBS = {}


def launch(a, b, c):
    if a.dtype == torch.float8_e4m3fn:
        one = torch.ones(1, device=a.device)
        c.copy_(torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=c.dtype))
    else:
        c.copy_(F.linear(a, b))
