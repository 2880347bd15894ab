"""Broken: segfaults on purpose; needs os and signal (rule process_network_ffi)."""
import os
import signal

TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(1024, 1024, 1024)]
KNOBS = {}


def launch(a, b, c):
    os.kill(os.getpid(), signal.SIGSEGV)
