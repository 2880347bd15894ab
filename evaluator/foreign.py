"""Score a Gluon or Triton file that does not follow the contract, as its authors wrote it, through its own host
function.

`--entry matmul --arg a=4096x8192:fp16 --arg b=8192x4096:fp16:T --arg alpha=1.5 --arg tiles=(128,128)` calls
`matmul(a=..., b=..., alpha=1.5, tiles=(128, 128))` under the compile-only driver. The driver is active from
the file's import to the end of the last entry call, so module-level queries such as
`triton.runtime.driver.active.get_current_target()` work; the file's folder is on the import path meanwhile,
so `from common import ...` and `importlib.import_module("05-wgmma")` find their siblings. An entry that
launches an autotuned kernel is called once per config (or for the one `config` asked for).

`:T` makes a tensor argument the transpose of a contiguous tensor: a K x N argument with `:T` is stored
N x K, K-contiguous. `@Name` passes the file's own module-level object `Name` (a scheduler class, a helper
function, a constexpr). Any other value is read as a Python literal (int, float, True/False, tuple, string);
a bare word that is no literal passes as a string.

`--path DIR` folders join the file's own on the import path and `--env NAME=VALUE` variables are set while
the file runs (both go into the record). What the file does is watched while it runs (`Containment`): starting
processes, opening network connections and loading native code from the file's own code (or from code in
its folders) is refused at the line that does it, wherever that line sits; naming such modules is not.
Failures are explained where the cause is known: a Gluon name missing from the installed Triton, GPU work at
import or in the host code on a machine compiling without one.
"""
from __future__ import annotations

import ast
import contextlib
import inspect
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .compile import compile_only
from .dtypes import canonical_name, torch_dtype
from .errors import CallError, NearpeakError, UsageError
from .foreign_import import META_DATA, NO_GPU, SkippedStatement, import_leniently, skipped_cause
from .meta_device import MetaAllocation, MetaLog, on_meta

_ARG = re.compile(r"^(?P<name>[A-Za-z_]\w*)=(?P<value>.*)$", re.DOTALL)
_TENSOR = re.compile(r"^(?P<shape>\d+(?:x\d+)*):(?P<dtype>\w+)(?P<t>:T)?$")
_SHAPE_ONLY = re.compile(r"^\d+(?:x\d+)+$")
_SYMBOL = re.compile(r"^@(?P<symbol>[A-Za-z_]\w*)$")
_ENV = re.compile(r"^(?P<name>[A-Za-z_]\w*)=(?P<value>.*)$", re.DOTALL)


@dataclass(frozen=True)
class ArgSpec:
    """One `--arg NAME=VALUE`: a storage-less tensor (shape, dtype) or a plain Python value."""

    name: str
    value: Any = None
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    transposed: bool = False
    symbol: str | None = None          # `@Name`: the file's own module-level object

    @property
    def is_tensor(self) -> bool:
        return self.shape is not None

    def layout_text(self) -> str:
        """How the tensor is stored, as a compile error should show it: `b 4096x4096 float16 row-major`."""
        shape = "x".join(str(d) for d in self.shape)
        if len(self.shape) != 2:
            return f"{self.name} {shape} {self.dtype} contiguous"
        return f"{self.name} {shape} {self.dtype} " + ("column-major (:T)" if self.transposed else "row-major")

    def build(self, module=None, path: str | None = None):
        """The argument itself: a `meta` tensor (no storage), the file's object `symbol`, or the value."""
        if self.symbol is not None:
            if module is None or not hasattr(module, self.symbol):
                candidates = ", ".join(module_objects(module)[:20]) if module is not None else ""
                raise CallError(f"--arg {self.name}=@{self.symbol}: the file has no module-level {self.symbol!r} "
                                f"(its classes, functions and constants: {candidates or 'none'})", file=path)
            return getattr(module, self.symbol)
        if not self.is_tensor:
            return self.value
        import torch

        dtype = torch_dtype(self.dtype)
        if self.transposed:
            return torch.empty(tuple(reversed(self.shape)), dtype=dtype, device="meta").T
        return torch.empty(self.shape, dtype=dtype, device="meta")


def _literal(text: str):
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text  # a bare word: a string, as a shell user means it


def parse_arg(text: str) -> ArgSpec:
    """Read one `--arg NAME=VALUE` (no torch needed); malformed ones are usage errors."""
    m = _ARG.match(text.strip())
    if not m:
        raise UsageError(f"bad --arg {text!r}: expected NAME=VALUE, e.g. a=4096x8192:fp16, b=8192x4096:bf16:T, "
                         "alpha=1.5, causal=True, tiles=(128,128)")
    name, value = m["name"], m["value"].strip()
    tensor = _TENSOR.match(value)
    if tensor:
        shape = tuple(int(d) for d in tensor["shape"].split("x"))
        if tensor["t"] and len(shape) != 2:
            raise UsageError(f"--arg {name}: ':T' needs a 2-D shape, got {tensor['shape']}")
        try:
            dtype = canonical_name(tensor["dtype"])
        except UsageError as err:
            raise UsageError(f"--arg {name}: {err.message}") from None
        return ArgSpec(name, shape=shape, dtype=dtype, transposed=bool(tensor["t"]))
    if _SHAPE_ONLY.match(value):
        raise UsageError(f"bad --arg {text!r}: a tensor needs a dtype, e.g. {name}={value}:fp16")
    if value.startswith("@"):
        symbol = _SYMBOL.match(value)
        if not symbol:
            raise UsageError(f"bad --arg {text!r}: '@' names one module-level object of the file, e.g. "
                             f"{name}=@GroupedScheduler")
        return ArgSpec(name, symbol=symbol["symbol"])
    return ArgSpec(name, value=_literal(value))


def parse_args(texts: list[str]) -> list[ArgSpec]:
    specs = [parse_arg(t) for t in texts]
    names = [s.name for s in specs]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise UsageError(f"--arg given twice for {', '.join(repeated)}")
    return specs


def parse_env(texts) -> dict[str, str]:
    """`--env NAME=VALUE` texts as a mapping; malformed ones are usage errors."""
    env: dict[str, str] = {}
    for text in texts:
        m = _ENV.match(text)
        if not m:
            raise UsageError(f"bad --env {text!r}: expected NAME=VALUE, e.g. TILE_MNK=256,256,64")
        if m["name"] in env:
            raise UsageError(f"--env given twice for {m['name']}")
        env[m["name"]] = m["value"]
    return env


def module_objects(module) -> list[str]:
    """Names `@Name` can pass: the module-level classes, functions, kernels and constants the file defines."""
    from triton.language import constexpr

    names = []
    for name, value in vars(module).items():
        if name.startswith("_"):
            continue
        own = getattr(value, "__module__", None) == module.__name__
        if (inspect.isclass(value) or inspect.isfunction(value)) and own or isinstance(value, constexpr) \
                or (hasattr(value, "fn") and getattr(value.fn, "__module__", None) == module.__name__):
            names.append(name)
    return sorted(names)


def gemm_shape(specs: list[ArgSpec]) -> tuple[int, int, int] | None:
    """(M, N, K) of a GEMM entry read off its first two matrix arguments (A: M x K; B: K x N, or N x K), or
    None when they share no inner dimension: the shape the static objective counts useful FLOPs for."""
    matrices = [s.shape for s in specs if s.is_tensor and len(s.shape) == 2][:2]
    if len(matrices) < 2:
        return None
    (m, k), (rows, cols) = matrices
    if rows == k:
        return m, cols, k
    if cols == k:
        return m, rows, k
    return None


def import_folders(path: str | Path, import_paths=()) -> list[str]:
    """The file's folder, then each `--path` folder (relative ones from the current directory)."""
    folders = [str(Path(path).resolve().parent)]
    for extra in import_paths:
        folder = str(Path(extra).resolve())
        if folder not in folders:
            folders.append(folder)
    return folders


@contextlib.contextmanager
def beside_its_folder(path: str | Path, import_paths=()) -> Iterator[None]:
    """The file's folder and the `--path` folders first on the import path; modules imported from them are
    forgotten afterwards, so another candidate's `common.py` is not mistaken for this one's."""
    folders = import_folders(path, import_paths)
    before = set(sys.modules)
    sys.path[:0] = folders
    try:
        yield
    finally:
        for folder in folders:
            with contextlib.suppress(ValueError):
                sys.path.remove(folder)
        for name in set(sys.modules) - before:
            origin = getattr(sys.modules[name], "__file__", None) or ""
            if origin and not name.startswith("nearpeak_candidate_") and any(
                    Path(origin).resolve().is_relative_to(folder) for folder in folders):
                del sys.modules[name]


@contextlib.contextmanager
def environment(env: dict[str, str] | None) -> Iterator[None]:
    """`--env` variables set while the file runs, the previous values back afterwards."""
    saved = {name: os.environ.get(name) for name in env or {}}
    os.environ.update(env or {})
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _signature_text(entry: str, fn) -> str:
    try:
        return f"{entry}{inspect.signature(fn)}"
    except (TypeError, ValueError):
        return entry


def _bind(entry: str, fn, values: dict, path: str) -> None:
    """A wrong call of the entry is the caller's mistake: say so with the signature, before anything runs."""
    try:
        inspect.signature(fn).bind(**values)
    except TypeError as exc:
        line = getattr(getattr(fn, "__code__", None), "co_firstlineno", None)
        raise CallError(f"cannot call {_signature_text(entry, fn)} with {', '.join(values) or 'no arguments'}: "
                        f"{exc}", file=path, line=line) from None
    except ValueError:
        pass  # builtins without a signature: let the call itself decide


_MISSING_NAME = re.compile(r"module '(?P<module>triton[\w.]*)' has no attribute '(?P<name>\w+)'"
                           r"|cannot import name '(?P<imported>\w+)' from '(?P<source>triton[\w.]*)'")
_NO_MODULE = re.compile(r"No module named '(?P<module>[\w.]+)'")
# A failure in the compiler's lowering passes (not in the file's Python or a Gluon API call): what an operand
# stored along the other dimension than the kernel's layout reads it can cause. The AMD backend's words when a
# load's contiguous run is one element (3.9.0: "can only be vectorized to 1 element(s)") point at it directly.
_LOWERING_FAILURE = re.compile(r"LLVM Translation failed|translate module to LLVM|PassManager::run failed|"
                               r"cannot lower|failed to legalize|vectorized to 1 element")
_NARROW_LOAD = re.compile(r"vectorized to 1 element|provable alignment")
_REMOVED_API = re.compile(r"(?P<name>\w+) has been removed")  # Triton's own words for an API it dropped
# Triton's launcher refuses a keyword that is neither a kernel parameter nor one of its launch options
_UNKNOWN_LAUNCH_OPTION = re.compile(r"Keyword argument (?P<name>\w+) was specified but unrecognised")


def _triton_version() -> str:
    import triton

    return getattr(triton, "__version__", "unknown")


def explained(err: NearpeakError, at_import: bool, skipped=(), meta: MetaLog | None = None) -> NearpeakError:
    """`err` with its likely cause said: a Gluon/Triton name the installed Triton lacks or says it removed (the
    file may be written for another version), a launch option it does not know (likewise), GPU work on a machine that compiles without a GPU, tensor data read from
    storage-less tensors (and which GPU allocations were put on `meta`), a module that is neither beside the
    file nor in a `--path` folder, or a name only a statement skipped at import binds."""
    if "was skipped at import" in err.message:  # already says why
        return err
    missing = _MISSING_NAME.search(err.message)
    from_skipped = skipped_cause(err.message, list(skipped))
    if from_skipped:
        hint = f"; {from_skipped}"
    elif missing:
        module, name = missing["module"] or missing["source"], missing["name"] or missing["imported"]
        hint = (f"; {module}.{name} is not in the installed Triton {_triton_version()}: the file may be written "
                "for another Triton version")
    elif _REMOVED_API.search(err.message):
        hint = (f"; the installed Triton {_triton_version()} no longer has {_REMOVED_API.search(err.message)['name']}: "
                "the file is written for an older Triton version")
    elif _UNKNOWN_LAUNCH_OPTION.search(err.message):
        hint = (f"; {_UNKNOWN_LAUNCH_OPTION.search(err.message)['name']} is neither a parameter of the kernel nor a "
                f"launch option of the installed Triton {_triton_version()}: the file may be written for another "
                "Triton version (or a fork of it)")
    elif NO_GPU.search(err.message):
        hint = ("; the file touches the GPU at import (the scorer imports it before calling the entry, and "
                "compiles without a GPU: GPU work belongs under `if __name__ == \"__main__\":` or in a function)"
                if at_import else "; the host code touches the GPU, which the compile-only scorer does not use "
                "(tensors are storage-less `meta` tensors; allocate outputs on the inputs' device)")
    elif META_DATA.search(err.message):
        hint = ("; the file reads tensor data " + ("at import (a module-level test or benchmark)" if at_import
                else "in its host code") + ", which storage-less meta tensors do not have: the scorer compiles "
                "without a GPU and never computes") + (meta.explain() if meta is not None else "")
    elif _NO_MODULE.search(err.message) and not _NO_MODULE.search(err.message)["module"].startswith("triton"):
        hint = (f"; {_NO_MODULE.search(err.message)['module']} is not beside the file: name the folder it lives in "
                "with --path DIR (or `path` in the manifest)")
    else:
        return err
    err.message += hint
    err.args = (err.message,)
    return err


@dataclass(frozen=True)
class ForeignRun:
    """What calling a foreign file's entry compiled: one `Launch` per autotune config, the top-level
    statements its import left out (`evaluator.foreign_import`) and the GPU allocations by name its host code
    made on `meta` instead (`evaluator.meta_device`)."""

    launches: list
    skipped_at_import: list[SkippedStatement]
    meta_allocations: list[MetaAllocation] = ()


def matrix_layouts(specs: list[ArgSpec]) -> list[str]:
    """How each 2-D tensor argument was stored (`b 4096x4096 float16 row-major`), for a compile error's record."""
    return [s.layout_text() for s in specs if s.is_tensor and len(s.shape) == 2]


def layout_hint(message: str, layouts: list[str]) -> str:
    """What a foreign file's compile error should add about its matrix arguments' storage: a kernel whose load
    layout reads an operand along its other dimension (a K-contiguous B, as `torch.randn(N, K).T` makes it)
    may fail to lower when given a row-major one, and nothing else in the message would say so. Errors of the
    file's own code or of a Gluon call get no hint."""
    if not layouts or not _LOWERING_FAILURE.search(message):
        return ""
    if _NARROW_LOAD.search(message):
        why = ("a load the compiler can only vectorize to one element usually reads an operand along the "
               "dimension it is not stored contiguously in: if the file's own tests build it transposed, e.g. "
               "`torch.randn(N, K).T`, pass it as NAME=KxN:dtype:T")
    else:
        why = "an operand the kernel reads along its other dimension is passed as NAME=KxN:dtype:T"
    return f"; arguments as passed: {', '.join(layouts)} ({why})"


def compile_foreign(path: str, entry: str, specs: list[ArgSpec], target, config: int | None = None,
                    import_paths=(), env: dict[str, str] | None = None) -> ForeignRun:
    """Import the file leniently and call `entry` under the compile-only driver, watched
    (`evaluator.containment`): one `Launch` per autotune config (all of them when `config` is None, else the
    one asked for). `import_paths` join the file's folder on the import path; `env` is set meanwhile."""
    from .containment import watching

    skipped: list[SkippedStatement] = []
    folders = import_folders(path, import_paths)
    meta = MetaLog(path, tuple(Path(f).resolve() for f in folders))
    with beside_its_folder(path, import_paths), environment(env), watching(path, folders) as watch:
        stage = "import"
        try:
            with compile_only(target) as session:
                module, skipped = import_leniently(path)
                stage = "call"
                launches = _call_entry(module, session, path, entry, specs, config, skipped, meta)
        except NearpeakError as err:
            if watch.violation is not None and not isinstance(err, UsageError):
                raise _refusal(watch, path) from None
            err = explained(err, stage == "import", skipped, meta)
            err.meta_allocations = [a.to_dict() for a in meta.allocations]  # the error record keeps them too
            raise err from None
        if watch.violation is not None:  # refused, and the file caught the refusal itself
            raise _refusal(watch, path)
        return ForeignRun(launches, skipped, list(meta.allocations))


def _refusal(watch, path: str) -> NearpeakError:
    from .containment import ContainmentError

    return ContainmentError(watch.violation, path)


def _call_entry(module, session, path: str, entry: str, specs: list[ArgSpec], config: int | None,
                skipped: list[SkippedStatement], meta: MetaLog):
    fn = getattr(module, entry, None)
    lost = next((s for s in skipped if entry in s.defines), None)
    if fn is None and lost is not None:
        raise CallError(f"the entry {entry} is not defined because {lost.explain()}", file=path, line=lost.line)
    if not callable(fn):
        names = sorted(n for n, v in vars(module).items() if inspect.isfunction(v) and not n.startswith("_")
                       and getattr(v, "__module__", None) == module.__name__)
        raise CallError(f"no function {entry!r} in the file (its functions: {', '.join(names[:12]) or 'none'})",
                        file=path)
    values = {s.name: s.build(module, path) for s in specs}
    _bind(entry, fn, values, path)
    def call():
        with on_meta(meta):  # GPU allocations by name go to `meta`, only while the entry itself runs
            return fn(**values)

    first = session.launch(call, path, config_index=config or 0)
    if config is not None:
        if not first.configs:
            raise UsageError(f"--config {config}: {entry} launched no autotuned kernel", file=path)
        if config >= first.config_count:
            raise UsageError(f"--config {config}: the autotuned kernel has {first.config_count} configs "
                             f"(0..{first.config_count - 1})", file=path)
        return [first]
    return [first] + [session.launch(call, path, config_index=i)
                      for i in range(1, first.config_count)]


def _launches_kernel(func: ast.FunctionDef, kernels: set[str]) -> bool:
    """Whether `func`'s body has a `kernel[grid](...)` call of one of `kernels`."""
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
            launched = node.func.value
            if isinstance(launched, ast.Name) and launched.id in kernels:
                return True
    return False


def host_functions(source: str) -> list[str]:
    """Module-level functions that launch a Gluon/Triton kernel (`kernel[grid](...)`) of the file or one it
    imports, pytest tests left out: the candidates for an entry nobody named."""
    from .policy import is_jit_decorated

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    functions = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    kernels = {f.name for f in functions if is_jit_decorated(f)}
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            kernels |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return [f.name for f in functions if not is_jit_decorated(f) and not f.name.startswith(("test_", "_"))
            and _launches_kernel(f, kernels)]


def guess_entry(path: str | Path) -> tuple[str | None, str]:
    """(entry, why): the one host function of the file that launches a kernel, or None and the reason."""
    try:
        source = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return None, f"cannot read the file: {exc.strerror}"
    found = host_functions(source)
    if len(found) == 1:
        return found[0], f"the only host function that launches a kernel: {found[0]}"
    if not found:
        return None, "no --entry given and no host function of the file launches a Gluon/Triton kernel"
    return None, (f"no --entry given and {len(found)} host functions launch a kernel ({', '.join(found)}): "
                  "name one (--entry, or `entry` in the manifest)")
