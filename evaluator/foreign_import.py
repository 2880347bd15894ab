"""Import a foreign file the way a reader skims it: top-level statements in order, demos that need a GPU left out.

Tutorials run a demo or a test at module level: the classic matmul tutorial launches its kernel on random
tensors, compares the result with `torch.allclose` and benchmarks a sweep, all at import. The scorer compiles
without a GPU and hands the file storage-less `meta` tensors, so such a statement cannot run here, yet the
kernels and the host function the user named are defined by the statements around it.

`import_leniently` runs the file's top-level statements one at a time in the module's namespace (same file
name and line numbers, so Triton finds each kernel's source and errors keep their lines). A statement that
fails for a reason of this machine, not of the file, is skipped and listed (`SkippedStatement`):

- `tensor_data`: it reads values a meta tensor does not have (`.item()`, `allclose`, printing a result);
- `no_gpu`: it asks for a GPU (a CUDA tensor, a device synchronize, a benchmark timer);
- `missing_module`: library code it called imports an optional package that is not installed here (a
  benchmark's `pandas`); the file's own import statements are never skipped;
- `skipped_name`: it uses a name only a skipped statement would have bound.

Anything else (a compile error of a kernel launched at import, a Gluon name the installed Triton lacks, an
`assert`, a refused process) still fails the import at the file's innermost line. Imports are never skipped:
what a file imports is what its kernels are made of. Whether the entry and what it needs got defined is
checked when the entry is called (`skipped_cause` explains a `NameError` there). Containment is unaffected:
its refusals are `NearpeakError`s, which are never skipped.
"""
from __future__ import annotations
import __future__

import ast
import importlib.util
import re
import sys
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType

from .errors import CandidateNotFound, ContractError, ImportFailure, NearpeakError

# What an exception from this machine's missing pieces says (torch, Triton, the CUDA/HIP runtimes).
META_DATA = re.compile(r"cannot be called on meta tensors|meta tensors? (?:do|does) not|on the 'meta' device"
                       r"|Cannot copy out of meta tensor|meta tensors? (?:have|has) no data"
                       r"|aten::_local_scalar_dense|is not implemented for meta", re.IGNORECASE)
NO_GPU = re.compile(r"Torch not compiled with CUDA enabled|Found no NVIDIA driver|No CUDA GPUs are available"
                    r"|no HIP GPUs are available|CUDA driver initialization failed|cudaGetDeviceCount|"
                    r"Invalid device string|hipErrorNoDevice", re.IGNORECASE)
_UNDEFINED = re.compile(r"name '(?P<name>\w+)' is not defined")

CAUSES = {
    "tensor_data": "it reads tensor values, which the storage-less meta tensors the scorer uses do not have",
    "no_gpu": "it needs a GPU, and the scorer compiles without one",
    "missing_module": "library code it calls imports a package that is not installed here",
    "skipped_name": "it uses a name that only a skipped statement would have defined",
}


@dataclass(frozen=True)
class SkippedStatement:
    """One top-level statement of a foreign file left out at import, and why."""

    line: int
    end_line: int
    statement: str        # its first source line
    cause: str            # a key of CAUSES
    reason: str           # the exception, in one line
    defines: tuple[str, ...] = ()  # names it would have bound

    def to_dict(self) -> dict:
        return {**asdict(self), "defines": list(self.defines), "why": CAUSES[self.cause]}

    def explain(self) -> str:
        return f"line {self.line} ({self.statement}) was skipped at import: {CAUSES[self.cause]} ({self.reason})"


def _innermost_line(path: Path, tb) -> int | None:
    resolved = str(path.resolve())
    line = None
    for frame in traceback.extract_tb(tb):
        if str(Path(frame.filename).resolve()) == resolved:
            line = frame.lineno
    return line


def _future_flags(tree: ast.Module) -> int:
    flags = 0
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            for alias in node.names:
                feature = getattr(__future__, alias.name, None)
                flags |= getattr(feature, "compiler_flag", 0)
    return flags


def bound_names(stmt: ast.stmt) -> tuple[str, ...]:
    """Names a top-level statement binds in the module (assignments, defs, classes, loop targets, at any depth
    of its `if`/`for`/`with`/`try` blocks, but not inside the functions and classes it defines)."""
    names: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.append(node.id)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.extend((a.asname or a.name).split(".")[0] for a in node.names)
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.Lambda, ast.GeneratorExp, ast.ListComp, ast.SetComp, ast.DictComp)):
                visit(child)

    visit(stmt)
    return tuple(dict.fromkeys(names))


def _chain_text(exc: BaseException) -> str:
    seen, texts = set(), []
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        texts.append(f"{type(exc).__name__}: {exc}")
        exc = exc.__cause__ or exc.__context__
    return "\n".join(texts)


def environmental_cause(exc: BaseException, stmt: ast.stmt, skipped: dict[str, SkippedStatement]) -> str | None:
    """The CAUSES key when `exc`, raised by top-level statement `stmt`, comes from this machine (no GPU, no
    tensor data, an optional package missing, a name a skipped statement would have bound), else None."""
    if isinstance(exc, (NearpeakError, KeyboardInterrupt, SystemExit)) or isinstance(stmt, (ast.Import,
                                                                                          ast.ImportFrom)):
        return None
    text = _chain_text(exc)
    if META_DATA.search(text):
        return "tensor_data"
    if NO_GPU.search(text):
        return "no_gpu"
    if isinstance(exc, ModuleNotFoundError) and not (exc.name or "").startswith("triton"):
        return "missing_module"
    undefined = _UNDEFINED.search(str(exc)) if isinstance(exc, NameError) else None
    if undefined and undefined["name"] in skipped:
        return "skipped_name"
    return None


def import_leniently(path: str | Path) -> tuple[ModuleType, list[SkippedStatement]]:
    """The file's module, with the top-level statements that could not run here left out (and listed)."""
    path = Path(path)
    if not path.is_file():
        raise CandidateNotFound("no such kernel file", file=str(path))
    source = path.read_bytes()
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise ImportFailure(f"syntax error: {exc.msg}", file=str(path), line=exc.lineno) from None
    name = f"nearpeak_candidate_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None:
        raise ContractError("not an importable Python file", file=str(path))
    module = importlib.util.module_from_spec(spec)
    module.__doc__ = ast.get_docstring(tree)
    sys.modules[name] = module  # dataclasses and pickling look modules up by name
    flags = _future_flags(tree)
    lines = source.decode("utf-8", errors="replace").splitlines()
    skipped: list[SkippedStatement] = []
    by_name: dict[str, SkippedStatement] = {}
    for stmt in tree.body:
        code = compile(ast.Module(body=[stmt], type_ignores=[]), str(path), "exec", flags=flags, dont_inherit=True)
        try:
            exec(code, module.__dict__)  # noqa: S102 - running the file is what importing it means
        except BaseException as exc:
            cause = environmental_cause(exc, stmt, by_name)
            if cause is None:
                sys.modules.pop(name, None)
                if isinstance(exc, (KeyboardInterrupt, NearpeakError)):
                    raise
                line = _innermost_line(path, exc.__traceback__) or stmt.lineno
                raise ImportFailure(f"raised at import: {type(exc).__name__}: {exc}", file=str(path),
                                    line=line) from None
            start = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
            first = lines[start - 1].strip() if start <= len(lines) else ""
            reason = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
            entry = SkippedStatement(start, getattr(stmt, "end_lineno", stmt.lineno) or stmt.lineno,
                                     first[:120], cause, reason[:300], bound_names(stmt))
            skipped.append(entry)
            by_name.update({n: entry for n in entry.defines if n not in module.__dict__})
    return module, skipped


def skipped_cause(message: str, skipped: list[SkippedStatement]) -> str | None:
    """When `message` is a `NameError` for a name only a skipped statement binds, that statement, explained."""
    undefined = _UNDEFINED.search(message)
    if not undefined:
        return None
    for entry in skipped:
        if undefined["name"] in entry.defines:
            return f"{undefined['name']} is not defined because {entry.explain()}"
    return None
