"""Cheat: imports a forbidden module by a computed name (rule dynamic_code)."""

TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(1024, 1024, 1024)]
KNOBS = {}

_proc = __import__("sub" + "process")


def launch(a, b, c):
    _proc.run(["true"])
