"""Compile-only driver: reach the compiler through the kernel's own launch function, on any CPU.

The candidate's `launch(a, b, c, ...)` (or a foreign file's own host function) runs unchanged. Triton's
active driver is swapped for one that reports the requested GPU target, and `JITFunction.run` is wrapped so
each `kernel[grid](...)` call compiles (with the specialization the real runtime would derive from the
arguments: unit strides become constants, multiples of 16 get divisibility hints) but never launches. An
autotuned kernel compiles the one config the session selects instead of timing them all. Tensors live on
torch's `meta` device: they carry shape, strides and dtype but no storage, so a 4096x8192 operand costs
nothing, and their data pointer (0) is 16-byte aligned like a real GPU allocation.

Failures are classified where they arise: a Triton compilation error (`compile_error`, at the innermost
line of the candidate file), the host function's own `assert` (`contract_error`, at the assert), and any
other exception of the host code (`entry_error`, at its line).
"""
from __future__ import annotations

import contextlib
import re
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from .dtypes import torch_dtype
from .errors import CompileFailure, ContractError, EntryFailure, NearpeakError, UsageError
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


@dataclass(frozen=True)
class ConfigChoice:
    """The config an autotuned kernel compiled with: `index` of `count` in its `triton.autotune` list."""

    kernel: str
    index: int
    count: int
    values: dict[str, Any]

    def to_dict(self) -> dict:
        return {"kernel": self.kernel, "index": self.index, "count": self.count,
                "values": {k: v if isinstance(v, (int, float, bool, str, type(None))) else str(v)
                           for k, v in self.values.items()}}


@dataclass
class Launch:
    """What one call of a host function compiled."""

    kernels: list[CompiledKernel] = field(default_factory=list)
    configs: list[ConfigChoice] = field(default_factory=list)
    seconds: float = 0.0           # wall time of the call, compiles included

    @property
    def config_count(self) -> int:
        """How many configs the largest autotuned kernel of this launch offers (1 when none is autotuned)."""
        return max((c.count for c in self.configs), default=1)


def _driver_class():
    import torch
    from triton.backends.driver import DriverBase

    class DeviceProperties:
        """`driver.active.utils.get_device_properties`, answered from the target's datasheet facts."""

        def __init__(self, target: Target):
            self._target = target

        def get_device_properties(self, device=None) -> dict:
            t = self._target
            return {"multiprocessor_count": t.compute_units, "max_shared_mem": t.shared_bytes_per_cu,
                    "warpSize": t.warp_size, "max_num_regs": t.register_file}

    class CompileOnlyDriver(DriverBase):
        """Answers the runtime's questions for a GPU that is not there."""

        def __init__(self, target: Target):
            self.target = target.gpu_target
            self.utils = DeviceProperties(target)

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

        def set_current_device(self, device):
            pass

        def get_current_stream(self, device=None):
            return 0

    return CompileOnlyDriver


def torch_capability(target: Target) -> tuple[int, int]:
    """What `torch.cuda.get_device_capability()` reports on a GPU of `target`: CUDA's compute capability
    (arch 90 -> (9, 0)); on ROCm the gfx name's version (gfx950 -> (9, 5), gfx90a -> (9, 0), gfx1100 -> (11, 0))."""
    if isinstance(target.arch, int):
        return divmod(target.arch, 10)
    digits = str(target.arch).removeprefix("gfx")
    return int(digits[:-2]), int(digits[-2], 16)


@contextlib.contextmanager
def _torch_device_answers(target: Target) -> Iterator[None]:
    """`torch.cuda`'s questions about the GPU (capability, name, properties) answered for `target`: host code
    such as Triton's tutorials picks its path by them, on a machine that may have no GPU at all."""
    import torch

    major, minor = torch_capability(target)
    name = target.devices[0] if target.devices else target.name
    properties = SimpleNamespace(name=name, major=major, minor=minor, multi_processor_count=target.compute_units,
                                 warp_size=target.warp_size, shared_memory_per_block=target.shared_bytes_per_block,
                                 L2_cache_size=target.last_level_cache_bytes, gcnArchName=str(target.arch))
    answers = {"get_device_capability": lambda device=None: (major, minor),
               "get_device_name": lambda device=None: name,
               "get_device_properties": lambda device=None: properties}
    saved = {attr: getattr(torch.cuda, attr) for attr in answers}
    for attr, answer in answers.items():
        setattr(torch.cuda, attr, answer)
    try:
        yield
    finally:
        for attr, original in saved.items():
            setattr(torch.cuda, attr, original)


def _grid3(grid, bound_args) -> tuple[int, int, int]:
    if callable(grid):
        grid = grid(bound_args)
    grid = tuple(int(g) for g in grid)
    return (grid + (1, 1, 1))[:3]  # type: ignore[return-value]


class CompileSession:
    """One compile-only window; kernels launched inside it compile for `target` and are recorded."""

    def __init__(self, target: Target):
        self.target = target
        self.config_index = 0
        self._launch = Launch()

    def launch(self, call: Callable[[], Any], candidate_file: str, config_index: int = 0) -> Launch:
        """Run `call` (which launches kernels), compiling config `config_index` of any autotuned kernel.

        Errors name the candidate's line (see the module docstring); a launch that compiled nothing is a
        contract error.
        """
        self.config_index = config_index
        self._launch = Launch()
        started = time.perf_counter()
        try:
            call()
        except (NearpeakError, KeyboardInterrupt):
            raise
        except BaseException as exc:
            raise classify_failure(exc, candidate_file) from exc
        if not self._launch.kernels:
            raise ContractError("the launch compiled no Gluon/Triton kernel", file=candidate_file)
        self._launch.seconds = time.perf_counter() - started
        return self._launch

    def record(self, jit_fn, kernel, grid, bound_args) -> None:
        md = kernel.metadata._asdict() if hasattr(kernel.metadata, "_asdict") else dict(vars(kernel.metadata))
        src = kernel.src
        self._launch.kernels.append(CompiledKernel(
            name=md.get("name", jit_fn.__name__),
            grid=_grid3(grid, bound_args),
            asm=dict(kernel.asm),
            metadata={k: v for k, v in md.items() if k not in ("target",)},
            signature={k: str(v) for k, v in getattr(src, "signature", {}).items()},
            constants={str(k): v for k, v in getattr(src, "constants", {}).items()},
            source_file=jit_fn.fn.__code__.co_filename,
        ))

    def choose_config(self, autotuner):
        """The config of `autotuner` this launch compiles (the last one when the index runs past its list)."""
        configs = autotuner.configs
        index = min(self.config_index, len(configs) - 1)
        self._launch.configs.append(ConfigChoice(autotuner.base_fn.__name__, index, len(configs),
                                                 dict(configs[index].all_kwargs())))
        return configs[index]


@contextlib.contextmanager
def compile_only(target: Target) -> Iterator[CompileSession]:
    """Within this block the active Triton driver is a compile-only one for `target`: module-level driver
    queries work, `torch.cuda`'s capability, name and properties describe `target`, and every kernel launch
    compiles and is recorded by the yielded session."""
    from triton.runtime import driver as runtime_driver
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    session = CompileSession(target)
    original_run, original_autotune = JITFunction.run, Autotuner.run

    def recording_run(self, *args, grid, warmup, **kwargs):
        kernel = original_run(self, *args, grid=grid, warmup=True, **kwargs)
        if kernel is None:
            return None
        if hasattr(kernel, "result"):
            kernel = kernel.result()
        _, _, _, _, binder = self.device_caches[runtime_driver.active.get_current_device()]
        bound_args, _, _ = binder(*args, **kwargs)
        session.record(self, kernel, grid, bound_args)
        return kernel

    def one_config_run(self, *args, **kwargs):
        config = session.choose_config(self)
        self.nargs = dict(zip(self.arg_names, args))
        try:
            if config.pre_hook is not None:
                config.pre_hook({**self.nargs, **kwargs, **config.all_kwargs()})
            return self.fn.run(*args, **kwargs, **config.all_kwargs())
        finally:
            self.nargs = None

    with _LOCK, _torch_device_answers(target):
        previous = runtime_driver._active  # None until a real driver was ever asked for
        runtime_driver.set_active(_driver_class()(target))
        JITFunction.run, Autotuner.run = recording_run, one_config_run
        try:
            yield session
        finally:
            JITFunction.run, Autotuner.run = original_run, original_autotune
            runtime_driver._active = previous


# ---------------------------------------------------------------------------------------------
# Where a failure happened and what kind it is


def _chain(exc: BaseException) -> list[BaseException]:
    """`exc` and the exceptions it was raised from, outermost first."""
    seen: list[BaseException] = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


def _locate_source(src: str, lineno: int, path: str) -> int | None:
    """A Triton error's line is relative to the jitted function's source; find that source in `path`."""
    want = [ln.strip() for ln in src.rstrip().splitlines()]
    try:
        lines = [ln.strip() for ln in Path(path).read_text().splitlines()]
    except OSError:
        return None
    for start, line in enumerate(lines):
        if line == want[0] and lines[start:start + len(want)] == want:
            return start + lineno
    return None


def _frames_in(exc: BaseException, folder: Path) -> list[traceback.FrameSummary]:
    """Traceback frames of `exc` in files under `folder`, outermost first."""
    frames = traceback.extract_tb(exc.__traceback__)
    return [f for f in frames if Path(f.filename).resolve().is_relative_to(folder)]


def _innermost_line(exc: BaseException, candidate: Path) -> int | None:
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve() == candidate]
    return lines[-1] if lines else None


def _last_line(text: str) -> str:
    """The last non-blank line of a compiler message: where Triton and LLVM put the actual reason."""
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    return lines[-1] if lines else "no message"


def _triton_root() -> Path:
    import triton

    return Path(triton.__file__).resolve().parent


def classify_failure(exc: BaseException, candidate_file: str) -> NearpeakError:
    """Turn an exception from a host function's call into a located, classified error."""
    from triton.compiler.errors import CompilationError

    candidate = Path(candidate_file).resolve()
    chain = _chain(exc)
    compilation = [e for e in chain if isinstance(e, CompilationError)]
    if compilation:
        line = None
        for err in compilation:  # outermost first: the last one found in the candidate is the innermost
            lineno = getattr(err.node, "lineno", None)
            if lineno is not None and err.src:
                line = _locate_source(err.src, lineno, str(candidate)) or line
        reason = next((e.error_message for e in reversed(compilation) if e.error_message), None)
        reason = reason or (compilation[-1].__cause__ and str(compilation[-1].__cause__)) or "compilation failed"
        return CompileFailure(f"compile error: {_last_line(reason)}", file=candidate_file,
                              line=line or _innermost_line(exc, candidate))
    line = _innermost_line(exc, candidate)
    if _frames_in(exc, _triton_root()):
        return CompileFailure(f"{type(exc).__name__} while compiling: {_last_line(str(exc))}", file=candidate_file,
                              line=line)
    own = _frames_in(exc, candidate.parent)
    where = own[-1] if own else None
    elsewhere = f" (in {Path(where.filename).name}:{where.lineno})" if where and Path(
        where.filename).resolve() != candidate else ""
    frames = traceback.extract_tb(exc.__traceback__)
    raised_by_own_code = bool(frames) and where is not None and frames[-1] == where
    if isinstance(exc, AssertionError) and raised_by_own_code:  # not an assert inside torch the host code called
        said = str(exc) or (where.line or "").strip()
        return ContractError(f"the host code's own check failed{elsewhere}: {said}", file=candidate_file, line=line)
    return EntryFailure(f"the host code raised {type(exc).__name__}{elsewhere}: {_last_line(str(exc))}",
                        file=candidate_file, line=line)


# `FILE:LINE:COL: error: ...`, or MLIR's location form `loc("name"("FILE":LINE:COL)): error: ...` (a named value's
# location, as an LLVM translation failure prints it) and `loc("FILE":LINE:COL): error: ...`.
_DIAGNOSTIC = re.compile(r'^(?:loc\((?:"[^"]*"\()?"(?P<locfile>[^"]+)":(?P<locline>\d+):\d+\)+'
                         r'|(?P<file>[^\s:(][^:]*):(?P<line>\d+):\d+): error: (?P<message>.*)$')


def compiler_diagnostic(stderr: str, candidate_file: str) -> tuple[int, str] | None:
    """(line, message) of the first MLIR/LLVM `error:` diagnostic in the candidate file, from a stderr text.

    Triton's passes print their diagnostics straight to the process's stderr with the kernel's source
    location; the exception that follows only says "error encountered during parsing".
    """
    candidate = Path(candidate_file).resolve()
    lines = stderr.splitlines()
    for i, text in enumerate(lines):
        m = _DIAGNOSTIC.match(text.strip())
        if not m or Path(m["file"] or m["locfile"]).resolve() != candidate:
            continue
        message = m["message"].strip()
        following = lines[i + 1] if i + 1 < len(lines) else ""
        if following and not following[0].isspace() and not _DIAGNOSTIC.match(following.strip()):
            message += " " + following.strip()
        return int(m["line"] or m["locline"]), message[:400]
    return None


def last_compiler_message(stderr: str) -> str | None:
    """The last line a dying compiler printed (e.g. `LLVM ERROR: ...`), skipping Python's own noise."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    marked = [ln for ln in lines if re.search(r"LLVM ERROR|error:|Assertion|Aborted|Segmentation", ln)]
    pick = (marked or lines)[-1:] or [None]
    return pick[0][:400] if pick[0] else None


def run_compile(call: Callable[[], Any], target: Target, candidate_file: str) -> list[CompiledKernel]:
    """Run `call` (which launches kernels) under the compile-only driver; errors name the candidate line."""
    with compile_only(target) as session:
        return session.launch(call, candidate_file).kernels


# ---------------------------------------------------------------------------------------------
# Arguments for contract kernels


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
