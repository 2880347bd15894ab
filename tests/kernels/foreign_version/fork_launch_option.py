"""Written for a Triton that takes a launch option the installed release does not know (as Triton 3.6.0 does not know
`llvm_fn_attrs`): the scorer must say the option is unknown to the installed Triton and that the file may
target another one, at the launch line."""
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def fill_kernel(c_ptr, BLOCK: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1], [64], [4], [0])
    offs = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, layout=layout)
    gl.store(c_ptr + offs, gl.zeros((BLOCK,), gl.float16, layout))


def fill(c):
    fill_kernel[(triton.cdiv(c.numel(), 64),)](c, BLOCK=64, num_warps=4, not_a_launch_option_anywhere=("x", "y"))
    return c
