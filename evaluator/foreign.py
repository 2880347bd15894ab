"""Score a Gluon kernel file that does not follow the contract, through its own host function.

`--entry matmul --arg a=4096x8192:float16 --arg b=8192x4096:float16:T` calls `matmul(a=..., b=...)`
under the compile-only driver. `:T` makes the argument the transpose of a contiguous tensor: a K x N
argument with `:T` is stored N x K, K-contiguous. `NAME=INT` passes a plain integer.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import ContractError, UsageError

_ARG = re.compile(r"^(?P<name>[A-Za-z_]\w*)=(?:(?P<int>-?\d+)|(?P<shape>\d+(?:x\d+)*):(?P<dtype>\w+)(?P<t>:T)?)$")


@dataclass(frozen=True)
class ArgSpec:
    name: str
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    transposed: bool = False
    value: int | None = None

    def build(self):
        if self.value is not None:
            return self.value
        import torch

        from .compile import torch_dtype

        dtype = torch_dtype(self.dtype)
        if self.transposed:
            if len(self.shape) != 2:
                raise UsageError(f"--arg {self.name}: ':T' needs a 2-D shape")
            return torch.empty(tuple(reversed(self.shape)), dtype=dtype, device="meta").T
        return torch.empty(self.shape, dtype=dtype, device="meta")


def parse_arg(text: str) -> ArgSpec:
    m = _ARG.match(text.strip())
    if not m:
        raise UsageError(f"bad --arg {text!r}: expected NAME=SHAPE:DTYPE[:T] (e.g. a=4096x8192:float16) or NAME=INT")
    if m.group("int") is not None:
        return ArgSpec(m.group("name"), value=int(m.group("int")))
    shape = tuple(int(d) for d in m.group("shape").split("x"))
    return ArgSpec(m.group("name"), shape=shape, dtype=m.group("dtype"), transposed=bool(m.group("t")))


def compile_foreign(path: str, entry: str, args: list[str], target):
    """Import the file, build the arguments and compile whatever kernels `entry` launches."""
    from .compile import run_compile
    from .contract import load_module

    specs = [parse_arg(a) for a in args]
    module = load_module(path)
    fn = getattr(module, entry, None)
    if not callable(fn):
        names = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))[:12]
        raise ContractError(f"no function {entry!r} in the file (functions: {', '.join(names)})", file=path)
    values = {s.name: s.build() for s in specs}
    return run_compile(lambda: fn(**values), target, path)
