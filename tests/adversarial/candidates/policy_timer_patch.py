"""Cheat: makes every CUDA event report a tiny elapsed time (rule timer_patch)."""
import torch

TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(1024, 1024, 1024)]
KNOBS = {}

torch.cuda.Event.elapsed_time = lambda self, end: 1e-3


def launch(a, b, c):
    c.zero_()
