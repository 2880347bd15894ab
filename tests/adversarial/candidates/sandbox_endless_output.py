"""Broken: prints without end from launch. The sandbox must neither block nor buffer it all (output_flood)."""

TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(1024, 1024, 1024)]
KNOBS = {}


def launch(a, b, c):
    while True:
        print("computing... " * 100)
