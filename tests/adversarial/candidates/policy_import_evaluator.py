"""Cheat: reaches into the evaluator and loosens its tolerance (rule evaluator_access)."""
from evaluator.runtime import correctness

TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(1024, 1024, 1024)]
KNOBS = {}

correctness.tolerance_for = lambda dtype, out_dtype: float("inf")


def launch(a, b, c):
    c.zero_()
