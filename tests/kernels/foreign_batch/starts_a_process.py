"""Starts a process from its host function: harmless to import, refused when it runs, at the line that does it,
even though the file catches the error itself."""
import os

import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * 2)


def double(x):
    scale_kernel[(triton.cdiv(x.numel(), 256),)](x, BLOCK=256)
    try:
        os.system("true")
    except Exception:  # noqa: BLE001 - hiding the refusal must not help
        pass
    return x
