"""Score a Gluon or Triton file that does not follow the contract, as its authors wrote it, through its own host
function.

`--entry matmul --arg a=4096x8192:fp16 --arg b=8192x4096:fp16:T --arg alpha=1.5 --arg tiles=(128,128)` calls
`matmul(a=..., b=..., alpha=1.5, tiles=(128, 128))` under the compile-only driver. The driver is active from
the file's import to the end of the last entry call, so module-level queries such as
`triton.runtime.driver.active.get_current_target()` work; the file's folder is on the import path meanwhile,
so `from common import ...` and `importlib.import_module("05-wgmma")` find their siblings. An entry that
launches an autotuned kernel is called once per config (or for the one `config` asked for).

`:T` makes a tensor argument the transpose of a contiguous tensor: a K x N argument with `:T` is stored
N x K, K-contiguous. Any other value is read as a Python literal (int, float, True/False, tuple, string);
a bare word that is no literal passes as a string.
"""
from __future__ import annotations

import ast
import contextlib
import inspect
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .compile import compile_only
from .contract import load_module
from .dtypes import canonical_name, torch_dtype
from .errors import CallError, UsageError

_ARG = re.compile(r"^(?P<name>[A-Za-z_]\w*)=(?P<value>.*)$", re.DOTALL)
_TENSOR = re.compile(r"^(?P<shape>\d+(?:x\d+)*):(?P<dtype>\w+)(?P<t>:T)?$")
_SHAPE_ONLY = re.compile(r"^\d+(?:x\d+)+$")


@dataclass(frozen=True)
class ArgSpec:
    """One `--arg NAME=VALUE`: a storage-less tensor (shape, dtype) or a plain Python value."""

    name: str
    value: Any = None
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    transposed: bool = False

    @property
    def is_tensor(self) -> bool:
        return self.shape is not None

    def build(self):
        """The argument itself: a `meta` tensor (no storage) or the value."""
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
    return ArgSpec(name, value=_literal(value))


def parse_args(texts: list[str]) -> list[ArgSpec]:
    specs = [parse_arg(t) for t in texts]
    names = [s.name for s in specs]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise UsageError(f"--arg given twice for {', '.join(repeated)}")
    return specs


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


@contextlib.contextmanager
def beside_its_folder(path: str | Path) -> Iterator[None]:
    """The file's folder first on the import path; sibling modules it imported are forgotten afterwards, so
    another candidate's `common.py` is not mistaken for this one's."""
    folder = str(Path(path).resolve().parent)
    before = set(sys.modules)
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(folder)
        for name in set(sys.modules) - before:
            origin = getattr(sys.modules[name], "__file__", None) or ""
            if origin and str(Path(origin).resolve().parent) == folder and not name.startswith("nearpeak_candidate_"):
                del sys.modules[name]


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


def compile_foreign(path: str, entry: str, specs: list[ArgSpec], target, config: int | None = None):
    """Import the file and call `entry` under the compile-only driver: one `Launch` per autotune config
    (all of them when `config` is None, else the one asked for)."""
    with beside_its_folder(path), compile_only(target) as session:
        module = load_module(path)
        fn = getattr(module, entry, None)
        if not callable(fn):
            names = sorted(n for n, v in vars(module).items() if inspect.isfunction(v) and not n.startswith("_")
                           and getattr(v, "__module__", None) == module.__name__)
            raise CallError(f"no function {entry!r} in the file (its functions: {', '.join(names[:12]) or 'none'})",
                            file=path)
        values = {s.name: s.build() for s in specs}
        _bind(entry, fn, values, path)
        first = session.launch(lambda: fn(**values), path, config_index=config or 0)
        if config is not None:
            if not first.configs:
                raise UsageError(f"--config {config}: {entry} launched no autotuned kernel", file=path)
            if config >= first.config_count:
                raise UsageError(f"--config {config}: the autotuned kernel has {first.config_count} configs "
                                 f"(0..{first.config_count - 1})", file=path)
            return [first]
        return [first] + [session.launch(lambda: fn(**values), path, config_index=i)
                          for i in range(1, first.config_count)]
