"""Cheat: runs an external program to do the work (rule process_network_ffi)."""
import subprocess

TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(1024, 1024, 1024)]
KNOBS = {}


def launch(a, b, c):
    subprocess.run(["nvidia-smi", "-lgc", "2100"], check=False)
