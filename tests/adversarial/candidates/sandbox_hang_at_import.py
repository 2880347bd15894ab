"""Broken: never finishes importing. Passes the policy; the sandbox's wall-clock limit must end it (timeout)."""

TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(1024, 1024, 1024)]
KNOBS = {}

while True:
    pass


def launch(a, b, c):
    c.zero_()
