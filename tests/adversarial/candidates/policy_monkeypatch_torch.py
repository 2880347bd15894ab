"""Cheat: replaces the comparisons the evaluator relies on (rule monkeypatch)."""
import torch

TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(1024, 1024, 1024)]
KNOBS = {}

torch.allclose = lambda *args, **kwargs: True
torch.equal = lambda *args, **kwargs: False


def launch(a, b, c):
    c.zero_()
