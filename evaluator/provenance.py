"""Which code computed the result: only the candidate's own Triton/Gluon kernels may.

The policy's name lists (evaluator.policy) refuse the vendor GEMM by name; a GEMM also comes as a
convolution, a broadcast multiply and sum, an aliased module, or a library's own Triton kernel. So while the
candidate's `launch` runs, on every path (the compile-only launch on meta tensors, the checked, timed and
compared calls on a GPU), a `Trace` records:

- every torch operator dispatched from the candidate's code (a `TorchDispatchMode`, which sees operators
  on meta tensors too, so the static screen on a CPU catches them). Views, tensor metadata, allocations
  and constant fills are fine; any operator that reads tensor data is foreign compute;
- every Triton/Gluon kernel launched, with the file that defines it: it must be the candidate's file;
- on a GPU, `device_kernels` lists the device kernels a few launches really ran (torch.profiler); kernels
  other than the candidate's own, a constant fill or a memset are foreign compute.

A violation gives the status `foreign_compute`, naming the operator or kernel and the candidate's line.
"""
from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .errors import NearpeakError

STATUS = "foreign_compute"

# aten operators that read no tensor data: views and metadata, allocation, constant fills, reading a scalar.
NON_COMPUTING_OPS = frozenset({
    # views and aliases
    "view", "_unsafe_view", "_reshape_alias", "reshape", "t", "transpose", "permute", "expand", "as_strided",
    "slice", "select", "narrow", "unsqueeze", "squeeze", "alias", "detach", "lift_fresh", "unflatten", "flatten",
    "split", "split_with_sizes", "chunk", "unbind", "diagonal", "view_as", "expand_as", "movedim", "swapaxes",
    "unfold", "view_as_real", "view_as_complex", "_neg_view", "_conj", "conj", "real", "imag",
    # metadata
    "size", "stride", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "numel", "dim", "is_contiguous",
    "is_same_size", "_local_scalar_dense", "is_nonzero", "storage_offset",
    # allocation and constant fills
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like", "new_zeros",
    "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "scalar_tensor", "arange", "fill_", "zero_",
    "record_stream",
})
# Device activity (profiler names) that only writes constants or moves bytes: fills, memsets, copies.
NON_COMPUTING_KERNELS = ("FillFunctor", "Memset", "memset", "Memcpy")


@dataclass(frozen=True)
class Foreign:
    """One piece of compute that was not the candidate's own kernel."""

    kind: str          # "torch_operator" | "triton_kernel" | "device_kernel"
    name: str
    line: int | None   # the candidate's line that led to it, when known
    detail: str = ""

    def describe(self) -> str:
        where = f" at line {self.line}" if self.line else ""
        what = {"torch_operator": "torch operator", "triton_kernel": "Triton kernel",
                "device_kernel": "device kernel"}[self.kind]
        return f"{what} {self.name}{where} computes outside the candidate's own kernels{self.detail}"


class ForeignComputeError(NearpeakError):
    status = STATUS


@dataclass
class Trace:
    """What the candidate's code computed with, collected over any number of guarded calls."""

    candidate_file: str
    foreign: list[Foreign] = field(default_factory=list)
    operators: dict[str, int] = field(default_factory=dict)    # allowed aten operators seen, with counts
    own_kernels: dict[str, int] = field(default_factory=dict)  # the candidate's kernels launched, by name
    own_names: set[str] = field(default_factory=set)            # every kernel the candidate's file defines

    def __post_init__(self):
        self.candidate_file = str(Path(self.candidate_file).resolve())

    def candidate_line(self) -> int | None:
        """The innermost line of the candidate's file on the current Python stack."""
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename == self.candidate_file:
                return frame.f_lineno
            frame = frame.f_back
        return None

    def add(self, item: Foreign) -> None:
        if len(self.foreign) < 20 and item not in self.foreign:
            self.foreign.append(item)

    def on_operator(self, name: str) -> None:
        base = name.split(".")[0]
        if base in NON_COMPUTING_OPS:
            self.operators[base] = self.operators.get(base, 0) + 1
            return
        line = self.candidate_line()
        if line is not None:  # issued under the candidate's code, not the evaluator's own bookkeeping
            self.add(Foreign("torch_operator", f"aten.{name}", line))

    def on_kernel(self, name: str, source_file: str) -> None:
        if str(Path(source_file).resolve()) == self.candidate_file:
            self.own_kernels[name] = self.own_kernels.get(name, 0) + 1
        else:
            self.add(Foreign("triton_kernel", name, self.candidate_line(), f" (defined in {source_file})"))

    def declare_module(self, module) -> None:
        """Note the Triton/Gluon kernels `module` defines in the candidate's file (also those it launches
        through Triton's C launcher directly, which the JITFunction hook does not see)."""
        from triton.runtime.jit import JITFunction

        for value in vars(module).values():
            while not isinstance(value, JITFunction) and hasattr(value, "fn"):  # Autotuner, Heuristics
                value = value.fn
            if isinstance(value, JITFunction) and value.fn.__code__.co_filename == self.candidate_file:
                self.own_names.add(value.__name__)

    def check_device_kernels(self, names: list[str]) -> None:
        """Judge the device kernels a profiled launch ran: the candidate's own, constant fills, or foreign."""
        own = self.own_names | set(self.own_kernels)
        for name in names:
            if name in own or any(marker in name for marker in NON_COMPUTING_KERNELS):
                continue
            self.add(Foreign("device_kernel", name[:200], None))

    @property
    def ok(self) -> bool:
        return not self.foreign

    def error(self) -> ForeignComputeError:
        first = self.foreign[0]
        more = f" (+{len(self.foreign) - 1} more)" if len(self.foreign) > 1 else ""
        return ForeignComputeError(first.describe() + more, file=self.candidate_file, line=first.line)

    def to_dict(self) -> dict:
        return {"ok": self.ok, "foreign": [asdict(f) for f in self.foreign], "operators": dict(self.operators),
                "own_kernels": dict(self.own_kernels)}


_ACTIVE: list[Trace] = []   # the traces recording right now (nested guards all record)
_HOOKED = False


def _install_kernel_hook() -> None:
    """Wrap `JITFunction.run` once per process so every Triton/Gluon launch reports its defining file."""
    global _HOOKED
    if _HOOKED:
        return
    from triton.runtime.jit import JITFunction

    original = JITFunction.run

    def run(self, *args, **kwargs):
        if _ACTIVE:
            source = self.fn.__code__.co_filename
            for trace in _ACTIVE:
                trace.on_kernel(self.__name__, source)
        return original(self, *args, **kwargs)

    JITFunction.run = run
    _HOOKED = True


@functools.cache
def _mode_class():
    from torch.utils._python_dispatch import TorchDispatchMode

    class ProvenanceMode(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return False  # else torch wraps the handler in dynamo.disable, importing torch._dynamo (3 s)

        def __init__(self, trace: Trace):
            super().__init__()
            self.trace = trace

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.trace.on_operator(func.name().split("::", 1)[-1])
            return func(*args, **(kwargs or {}))

    return ProvenanceMode


@contextlib.contextmanager
def recording(trace: Trace) -> Iterator[Trace]:
    """While active, `trace` records torch operators and Triton launches (nested blocks all record)."""
    _install_kernel_hook()
    with _mode_class()(trace):
        _ACTIVE.append(trace)
        try:
            yield trace
        finally:
            _ACTIVE.remove(trace)


def guard(launch, trace: Trace):
    """`launch` wrapped so that every call records into `trace` (a few microseconds of host time per call)."""
    _install_kernel_hook()
    mode = _mode_class()(trace)

    def guarded(*args, **kwargs):
        with mode:
            _ACTIVE.append(trace)
            try:
                return launch(*args, **kwargs)
            finally:
                _ACTIVE.remove(trace)

    return guarded


def profiled_kernel_names(call, calls: int = 3) -> list[str] | None:
    """Names of the device kernels `call()` runs, `calls` times over, from torch.profiler (CUPTI / roctracer).

    None when the profiler gives no device activity at all (it is unavailable here); the caller then says
    the device side was not observed rather than guessing.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile

    if not torch.cuda.is_available():
        return None
    torch.cuda.synchronize()
    prof = profile(activities=[ProfilerActivity.CUDA])
    try:
        prof.__enter__()
    except Exception:  # noqa: BLE001 - no profiler here is "not observed", never a verdict on the candidate
        return None
    try:
        for _ in range(calls):  # the candidate's own exceptions propagate, as from any other launch
            call()
        torch.cuda.synchronize()
    finally:
        events = _stop(prof)
    names = [e.name for e in events if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA]
    return names or None


def _stop(prof) -> list:
    """Stop the profiler and return its events; none when stopping or reading fails (then: not observed)."""
    try:
        prof.__exit__(None, None, None)
        return list(prof.events() or [])
    except Exception:  # noqa: BLE001 - the profiler's own failure is no verdict on the candidate
        return []


def kernel_check(trace: Trace, device_kernels: list[str] | None) -> dict:
    """The record's provenance check: torch operators and Triton kernels seen, and the profiled device kernels."""
    if device_kernels is not None:
        trace.check_device_kernels(device_kernels)
    observed = ("device kernels profiled: " + ", ".join(sorted(set(device_kernels)))[:300] if device_kernels
                else "device kernels not observed (no profiler activity)")
    if trace.ok:
        detail = f"only the candidate's kernels computed ({', '.join(trace.own_kernels) or 'none'}); {observed}"
    else:
        detail = trace.error().message
    return {"name": "provenance", "ok": trace.ok, "detail": detail, "reason": None if trace.ok else STATUS,
            **trace.to_dict(), "device_kernels": sorted(set(device_kernels or []))}
