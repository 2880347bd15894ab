"""Compile-only driver: reach the compiler through the kernel's own launch function, on any CPU.

The candidate's `launch(a, b, c, ...)` runs unchanged. Triton's active driver is swapped for one that
reports the requested GPU target, and `JITFunction.run` is wrapped so each `kernel[grid](...)` call
compiles (with the specialization the real runtime would derive from the arguments: unit strides
become constants, multiples of 16 get divisibility hints) but never launches. Tensors live on
torch's `meta` device: they carry shape, strides and dtype but no storage, so a 4096x8192 operand
costs nothing, and their data pointer (0) is 16-byte aligned like a real GPU allocation.
"""
from __future__ import annotations

import contextlib
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import CompileFailure, ContractError, UsageError
from .targets import Target

_LOCK = threading.Lock()  # the driver swap is process-global


@dataclass
class CompiledKernel:
    """One kernel a launch function compiled, with everything the static analysis reads."""

    name: str
    grid: tuple[int, int, int]
    asm: dict[str, Any]            # ttgir, llir, amdgcn | ptx, cubin, hsaco
    metadata: dict[str, Any]
    signature: dict[str, str] = field(default_factory=dict)
    constants: dict[str, Any] = field(default_factory=dict)
    source_file: str = ""

    @property
    def num_warps(self) -> int:
        return int(self.metadata.get("num_warps", 4))

    @property
    def shared_bytes(self) -> int:
        return int(self.metadata.get("shared", 0))


def _driver_class():
    import torch
    from triton.backends.driver import DriverBase

    class CompileOnlyDriver(DriverBase):
        """Answers the runtime's questions for a GPU that is not there."""

        def __init__(self, target: Target):
            self.target = target.gpu_target

        @classmethod
        def is_active(cls):
            return False

        def map_python_to_cpp_type(self, ty):
            raise NotImplementedError("compile-only driver cannot build launchers")

        def get_current_target(self):
            return self.target

        def get_active_torch_device(self):
            return torch.device("meta")

        def get_benchmarker(self):
            raise NotImplementedError("compile-only driver cannot time kernels")

        def get_current_device(self):
            return f"nearpeak-compile-only:{self.target.backend}:{self.target.arch}"

        def get_current_stream(self, device=None):
            return 0

    return CompileOnlyDriver


def _grid3(grid, bound_args) -> tuple[int, int, int]:
    if callable(grid):
        grid = grid(bound_args)
    grid = tuple(int(g) for g in grid)
    return (grid + (1, 1, 1))[:3]  # type: ignore[return-value]


@contextlib.contextmanager
def compile_only(target: Target) -> Iterator[list[CompiledKernel]]:
    """Within this block, every Triton/Gluon kernel launch compiles for `target` and is recorded."""
    from triton.runtime import driver as runtime_driver
    from triton.runtime.jit import JITFunction

    compiled: list[CompiledKernel] = []
    original_run = JITFunction.run

    def recording_run(self, *args, grid, warmup, **kwargs):
        kernel = original_run(self, *args, grid=grid, warmup=True, **kwargs)
        if kernel is None:
            return None
        if hasattr(kernel, "result"):
            kernel = kernel.result()
        _, _, _, _, binder = self.device_caches[runtime_driver.active.get_current_device()]
        bound_args, _, _ = binder(*args, **kwargs)
        md = kernel.metadata._asdict() if hasattr(kernel.metadata, "_asdict") else dict(vars(kernel.metadata))
        src = kernel.src
        compiled.append(CompiledKernel(
            name=md.get("name", self.__name__),
            grid=_grid3(grid, bound_args),
            asm=dict(kernel.asm),
            metadata={k: v for k, v in md.items() if k not in ("target",)},
            signature={k: str(v) for k, v in getattr(src, "signature", {}).items()},
            constants={str(k): v for k, v in getattr(src, "constants", {}).items()},
            source_file=self.fn.__code__.co_filename,
        ))
        return kernel

    with _LOCK:
        previous = runtime_driver._active  # None until a real driver was ever asked for
        runtime_driver.set_active(_driver_class()(target))
        JITFunction.run = recording_run
        try:
            yield compiled
        finally:
            JITFunction.run = original_run
            runtime_driver._active = previous


def _compile_error_location(exc: BaseException, files: set[str]) -> tuple[str | None, int | None]:
    """Map a Triton compilation error or a launch-time exception to a (file, line) of the candidate."""
    from triton.compiler.errors import CompilationError

    err = exc
    while err is not None:
        lineno = getattr(getattr(err, "node", None), "lineno", None)
        if isinstance(err, CompilationError) and lineno is not None and err.src:
            located = _locate_source(err.src, lineno, files)
            if located:
                return located
        err = err.__cause__ or err.__context__
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if str(Path(frame.filename).resolve()) in files:
            return frame.filename, frame.lineno
    return None, None


def _locate_source(src: str, lineno: int, files: set[str]) -> tuple[str, int] | None:
    """A Triton error's line is relative to the jitted function's source; find that source in the files."""
    first = next((ln.strip() for ln in src.splitlines() if ln.strip()), "")
    for name in files:
        lines = Path(name).read_text().splitlines()
        for no, line in enumerate(lines, 1):
            if line.strip() == first:
                return name, no + lineno - 1
    return None


def _last_line(text: str) -> str:
    """The last non-blank line of a compiler message: where Triton and LLVM put the actual reason."""
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    return lines[-1] if lines else "no message"


def run_compile(call: Callable[[], Any], target: Target, candidate_file: str) -> list[CompiledKernel]:
    """Run `call` (which launches kernels) under the compile-only driver; errors name the candidate line."""
    files = {str(Path(candidate_file).resolve())}
    try:
        with compile_only(target) as compiled:
            call()
    except ContractError:
        raise
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        file, line = _compile_error_location(exc, files)
        if file and Path(file).resolve() == Path(candidate_file).resolve():
            file = candidate_file
        message = _describe_compile_error(exc)
        raise CompileFailure(message, file=file or candidate_file, line=line) from exc
    if not compiled:
        raise ContractError("launch() compiled no Gluon/Triton kernel", file=candidate_file)
    return compiled


def _describe_compile_error(exc: BaseException) -> str:
    from triton.compiler.errors import CompilationError

    if isinstance(exc, CompilationError):
        reason = exc.error_message or (exc.__cause__ and str(exc.__cause__)) or "compilation failed"
        return f"compile error: {_last_line(str(reason))}"
    return f"{type(exc).__name__} while compiling: {_last_line(str(exc))}"


# ---------------------------------------------------------------------------------------------
# Arguments for contract kernels


def torch_dtype(name: str):
    import torch

    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise UsageError(f"unknown torch dtype {name!r}")
    return dtype


def operand_shapes(spec, shape) -> dict[str, tuple[tuple[int, ...], str]]:
    """Logical storage of each launch argument: name -> (shape, dtype name)."""
    m, n, k = shape
    if spec.scales == "e8m0_k32":  # e2m1 packed two per byte, one e8m0 scale per 32 along K
        return {"a": ((m, k // 2), "uint8"), "b": ((n, k // 2), "uint8"), "c": ((m, n), spec.out_dtype),
                "a_scale": ((m, k // 32), "uint8"), "b_scale": ((n, k // 32), "uint8")}
    args = {"a": ((m, k), spec.dtype), "b": ((n, k), spec.dtype), "c": ((m, n), spec.out_dtype)}
    if spec.scales == "per_tensor":
        args.update({"a_scale": ((1,), "float32"), "b_scale": ((1,), "float32")})
    return args


def meta_arguments(spec, shape) -> dict[str, Any]:
    import torch

    return {name: torch.empty(s, dtype=torch_dtype(dt), device="meta")
            for name, (s, dt) in operand_shapes(spec, shape).items()}


def compile_candidate(module, spec, target: Target, shape=None, knobs: dict | None = None) -> list[CompiledKernel]:
    """Compile a contract kernel for `target` at `shape` (default: its benchmark shape)."""
    shape = tuple(shape or spec.benchmark_shape)
    if not spec.supports(shape):
        raise UsageError(f"shape {shape} is not a multiple of the kernel's SHAPE_MULTIPLE {spec.shape_multiple}",
                         file=spec.path)
    merged = {**spec.knobs, **(knobs or {})}
    args = meta_arguments(spec, shape)
    return run_compile(lambda: module.launch(**args, **merged), target, spec.path)
