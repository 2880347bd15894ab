"""Host functions that allocate on the GPU by name, as tutorials do (`device="cuda"` rather than the inputs'
device). The compile-only scorer makes each of those allocations on `meta` while the entry runs, and lists it;
`reads_the_result` then reads the values back, which storage-less tensors cannot give."""
import torch
import triton
import triton.language as tl
from output_helpers import output_on_gpu


@triton.jit
def copy_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))


def _copy_into(x, y):
    copy_kernel[(triton.cdiv(x.numel(), 256),)](x, y, BLOCK=256)
    return y


def empty_on_cuda(x):
    return _copy_into(x, torch.empty(x.shape, dtype=x.dtype, device="cuda"))


def zeros_on_cuda0(x):
    return _copy_into(x, torch.zeros(x.shape, dtype=x.dtype, device="cuda:0"))


def on_a_torch_device(x):
    gpu = torch.device("cuda")
    return _copy_into(x, torch.empty_like(x, device=gpu))


def made_here_then_cuda(x):
    y = torch.empty(x.shape, dtype=x.dtype).cuda()
    return _copy_into(x, y)


def made_here_then_to_cuda(x):
    y = torch.zeros(x.shape, dtype=x.dtype).to("cuda")
    return _copy_into(x, y)


def through_a_helper(x):
    return _copy_into(x, output_on_gpu(x))


def reads_the_result(x):
    y = _copy_into(x, torch.empty(x.shape, dtype=x.dtype, device="cuda"))
    return y.sum().item()


def asserts_gpu_inputs(x):
    assert x.is_cuda, "x must be a CUDA tensor"
    return _copy_into(x, torch.empty_like(x))
