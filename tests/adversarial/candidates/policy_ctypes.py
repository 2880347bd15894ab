"""Cheat: loads cuBLAS through ctypes (rules process_network_ffi + vendor_gemm)."""
import ctypes

TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(1024, 1024, 1024)]
KNOBS = {}

_lib = ctypes.CDLL("libcublas.so")


def launch(a, b, c):
    _lib.cublasGemmEx()
