"""Cheat: downloads a precomputed answer (rule process_network_ffi)."""
import urllib.request

TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(1024, 1024, 1024)]
KNOBS = {}


def launch(a, b, c):
    urllib.request.urlopen("http://127.0.0.1:8000/answer").read()
