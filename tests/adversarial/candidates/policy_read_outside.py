"""Cheat: reads a file outside its scratch directory, e.g. the reference results (rule file_io)."""

TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(1024, 1024, 1024)]
KNOBS = {}


def launch(a, b, c):
    with open("/etc/hostname") as handle:
        handle.read()
