"""Cheat: seeds torch so the "fresh random" inputs become predictable and precomputable (rule rng_seeding)."""
import torch

TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(1024, 1024, 1024)]
KNOBS = {}

torch.manual_seed(0)


def launch(a, b, c):
    c.zero_()
