"""A tutorial-shaped file whose module level runs a demo: a launch on random tensors, a check of the result's
values, a CUDA workspace, a line that uses it and a report that needs an optional package. Without a GPU only the
launch can run; the scorer leaves the other four out, lists each with its line and cause, and still scores
`double`."""
import torch
import triton
import triton.language as tl

DEVICE = triton.runtime.driver.active.get_active_torch_device()


@triton.jit
def double_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, 2 * tl.load(x_ptr + offs))


def double(x):
    y = torch.empty_like(x)
    double_kernel[(triton.cdiv(x.numel(), 256),)](x, y, BLOCK=256)
    return y


def report(rows):
    import nearpeak_absent_plotting_package  # noqa: F401 - a benchmark's optional dependency
    return rows


x = torch.randn(4096, device=DEVICE)
y = double(x)
if torch.allclose(y, 2 * x):
    print("the kernel matches torch")
WORKSPACE = torch.empty(1 << 16, device="cuda", dtype=torch.uint8)
print(f"workspace of {WORKSPACE.numel()} bytes")
report([1, 2, 3])
HALF = 0.5
