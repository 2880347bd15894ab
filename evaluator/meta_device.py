"""GPU allocations by name in a foreign host function, made on the storage-less `meta` device while it runs.

Tutorial host functions often allocate on the GPU by name rather than on their inputs' device:
`torch.empty((M, N), device="cuda")`, `device=torch.device("cuda:0")`, `x.cuda()`, `x.to("cuda")`. The
compile-only scorer has no GPU and hands the entry `meta` tensors (shapes, strides and dtypes, no storage),
so such a line would end the call with "Torch not compiled with CUDA enabled" before any kernel compiles.
While the entry is called (`on_meta`, entered around the call only, never at import), a `TorchFunctionMode`
turns a GPU device of any torch call (a factory's `device=`, `Tensor.to(...)`, `Tensor.cuda()`) into `meta`:
the tensor is what the inputs already are, and the kernel compiles with the same shapes, strides and dtypes.
The same mode answers `tensor.is_cuda` with True for a meta tensor when the file's own code asks (`assert
a.is_cuda` guards in host functions), never when torch or Triton does.

Each rewrite is kept (`MetaAllocation`: the file's line, the call and the device it named) and goes into the
record's `meta_allocations`. Nothing computes on `meta`: host code that reads such a tensor's values
(`.item()`, `allclose`, printing it) still fails, and the error says which lines were put on `meta`.
"""
from __future__ import annotations

import contextlib
import linecache
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class MetaAllocation:
    """One torch call of the host code that named a GPU device and was given `meta` instead."""

    line: int | None        # the foreign file's line that led to it
    call: str               # e.g. "torch.empty(device='cuda')", "Tensor.cuda()", "Tensor.to('cuda:0')"
    device: str             # the GPU device it named, as torch spells it
    statement: str          # the file's source line
    sibling: str | None = None  # "name.py:LINE" when a module in the file's folders made the call

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        where = f" (in {self.sibling})" if self.sibling else ""
        return f"line {self.line}: {self.call}{where}"


def gpu_device(value) -> str | None:
    """The GPU device `value` names (a device string, a `torch.device`, a CUDA index), or None."""
    import torch

    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return f"cuda:{value}"  # an index means the accelerator's device, as torch reads it
    if isinstance(value, (str, torch.device)):
        try:
            device = torch.device(value)
        except (RuntimeError, TypeError, ValueError):
            return None  # not a device (a dtype name handed to `.to`, say): left to torch
        return str(device) if device.type == "cuda" else None
    return None


@dataclass
class MetaLog:
    """The rewrites made while one foreign file's entry ran, in the order first seen, each line once."""

    path: str
    folders: tuple[Path, ...]
    allocations: list[MetaAllocation] = field(default_factory=list)

    def __post_init__(self):
        self.path = str(Path(self.path).resolve())

    def add(self, call: str, device: str, frame) -> None:
        line, sibling = self._where(frame)
        if any(a.line == line and a.call == call and a.sibling == sibling for a in self.allocations):
            return  # an autotuned entry is called once per config; a loop allocates many times
        statement = linecache.getline(self.path, line).strip() if line else ""
        self.allocations.append(MetaAllocation(line, call, device, statement, sibling))

    def _where(self, frame) -> tuple[int | None, str | None]:
        """The file's innermost line on the stack, and a sibling's `name:line` when the call was made there."""
        sibling = None
        while frame is not None:
            filename = frame.f_code.co_filename
            if not filename.startswith("<"):
                resolved = Path(filename).resolve()
                if str(resolved) == self.path:
                    return frame.f_lineno, sibling
                if sibling is None and self._in_folders(resolved):
                    sibling = f"{resolved.name}:{frame.f_lineno}"
            frame = frame.f_back
        return None, sibling

    def is_own_code(self, frame) -> bool:
        """Whether `frame` runs the foreign file or a module in its folders (not torch's or Triton's code)."""
        filename = frame.f_code.co_filename if frame is not None else "<none>"
        if filename.startswith("<"):
            return False
        resolved = Path(filename).resolve()
        return str(resolved) == self.path or self._in_folders(resolved)

    def _in_folders(self, resolved: Path) -> bool:
        return any(resolved.is_relative_to(f) for f in self.folders)

    def explain(self) -> str:
        """What a data-reading error after such rewrites should add."""
        return ("; the host code's GPU allocations by name were made on the storage-less meta device (" +
                ", ".join(a.describe() for a in self.allocations) + ")") if self.allocations else ""


def _call_text(name: str, original, keyword: bool) -> str:
    """How the call looked: `torch.empty(device='cuda')`, `Tensor.to('cuda:0')`, `Tensor.cuda()`."""
    shown = "" if original is None else (repr(original) if isinstance(original, (str, int))
                                         else f"torch.device({str(original)!r})")
    owner = "Tensor" if name in ("cuda", "to") else "torch"
    return f"{owner}.{name}({'device=' if keyword and shown else ''}{shown})"


@contextlib.contextmanager
def on_meta(log: MetaLog) -> Iterator[MetaLog]:
    """While active, torch calls that name a GPU device allocate on `meta` instead, each one kept in `log`."""
    import torch
    from torch.overrides import TorchFunctionMode

    cuda_method, to_method = torch.Tensor.cuda, torch.Tensor.to

    class GpuToMeta(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            name = getattr(func, "__name__", "")
            if getattr(func, "__self__", None) is torch.Tensor.is_cuda and args and args[0].is_meta \
                    and log.is_own_code(sys._getframe(1)):
                # `assert a.is_cuda` in the host code: its inputs stand for GPU tensors, so say they are one
                # (only to the file's own code; torch and Triton see the meta tensor as it is).
                log.add("Tensor.is_cuda (a meta input reported as on the GPU)", "cuda", sys._getframe(1))
                return True
            if func is cuda_method:
                original = args[1] if len(args) > 1 else kwargs.get("device")
                log.add(_call_text("cuda", original, "device" in kwargs),
                        (gpu_device(original) if original is not None else None) or "cuda", sys._getframe(1))
                return args[0].to("meta")
            if func is to_method and len(args) > 1 and gpu_device(args[1]):
                log.add(_call_text("to", args[1], False), gpu_device(args[1]), sys._getframe(1))
                args = (args[0], "meta", *args[2:])
            device = gpu_device(kwargs.get("device"))
            if device:
                log.add(_call_text("to" if func is to_method else name, kwargs["device"], True), device,
                        sys._getframe(1))
                kwargs["device"] = "meta"
            return func(*args, **kwargs)

    with GpuToMeta():
        yield log
