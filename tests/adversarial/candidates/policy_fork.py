"""Broken: forks a child that outlives the evaluation (rule process_network_ffi)."""
import os

TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(1024, 1024, 1024)]
KNOBS = {}


def launch(a, b, c):
    if os.fork() == 0:
        while True:
            pass
