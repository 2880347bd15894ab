"""The kernel contract: what a candidate file declares, and loading it.

A candidate is one Python file with module-level declarations and a `launch` function:

    TARGET = "gfx950"                      # or "sm90"
    DTYPE = "float16"                      # torch dtype name of A and B
    OUT_DTYPE = "float16"                  # torch dtype name of C
    SHAPES = [(4096, 4096, 8192)]          # (M, N, K) it supports; the first is the benchmark shape
    SHAPE_MULTIPLE = (256, 256, 64)        # every M, N, K must be a multiple; (1, 1, 1) = any shape
    KNOBS = {"BLOCK_M": 256, "num_warps": 4}   # numeric knobs, passed to launch as keywords
    KNOB_CHOICES = {"BLOCK_M": [128, 256]}     # optional: values a tuner may try
    SCALES = None                          # optional: "per_tensor" (fp8) or "e8m0_k32" (mxfp4)

    def launch(a, b, c, **knobs):          # C[M, N] = A[M, K] @ B[N, K]^T, B K-contiguous
        ...

`launch` is the single source of truth for the signature: the compile-only driver calls it with
storage-less tensors, the runtime calls it with real ones. docs/kernel-contract.md has the details.
"""
from __future__ import annotations

import ast
import importlib.util
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from .errors import CandidateNotFound, ContractError, ImportFailure
from .targets import known_targets

SCALE_KINDS = (None, "per_tensor", "e8m0_k32")
Shape = tuple[int, int, int]


@dataclass(frozen=True)
class KernelSpec:
    path: str
    target: str
    dtype: str
    out_dtype: str
    shapes: tuple[Shape, ...]
    shape_multiple: Shape
    knobs: dict[str, int] = field(default_factory=dict)
    knob_choices: dict[str, tuple[int, ...]] = field(default_factory=dict)
    scales: str | None = None
    fast_accum: bool = True        # fp8: accumulates in the matrix unit's own accumulator (no periodic fp32 promotion)

    @property
    def benchmark_shape(self) -> Shape:
        return self.shapes[0]

    def supports(self, shape: Shape) -> bool:
        return all(d > 0 and d % m == 0 for d, m in zip(shape, self.shape_multiple))

    def to_dict(self) -> dict:
        return {
            "target": self.target, "dtype": self.dtype, "out_dtype": self.out_dtype,
            "shapes": [list(s) for s in self.shapes], "shape_multiple": list(self.shape_multiple),
            "knobs": dict(self.knobs), "knob_choices": {k: list(v) for k, v in self.knob_choices.items()},
            "scales": self.scales, "fast_accum": self.fast_accum,
        }


def assignment(tree: ast.Module, name: str) -> ast.Assign | ast.AnnAssign | None:
    """The module-level statement that assigns `name`, if any."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return node
    return None


def declaration(source: str, name: str, default=None):
    """The literal value of module-level `name = <literal>` in a kernel's source, read without running it;
    `default` when absent or not a literal."""
    try:
        node = assignment(ast.parse(source), name)
    except SyntaxError:
        return default
    if node is None or node.value is None:
        return default
    try:
        return ast.literal_eval(node.value)
    except ValueError:
        return default


def read_constant(path: str | Path, name: str, default=None):
    """`declaration` of a kernel file on disk."""
    return declaration(Path(path).read_text(), name, default)


def _candidate_frame_line(path: str, tb) -> int | None:
    """Line of the innermost traceback frame that lies in the candidate file."""
    line = None
    resolved = str(Path(path).resolve())
    for frame in traceback.extract_tb(tb):
        if str(Path(frame.filename).resolve()) == resolved:
            line = frame.lineno
    return line


def load_module(path: str | Path) -> ModuleType:
    """Import a candidate file under a private module name; failures become `ImportFailure`."""
    path = Path(path)
    if not path.is_file():
        raise CandidateNotFound("no such kernel file", file=str(path))
    name = f"nearpeak_candidate_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ContractError("not an importable Python file", file=str(path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look modules up by name
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(name, None)
        raise ImportFailure(f"syntax error: {exc.msg}", file=str(path), line=exc.lineno) from None
    except BaseException as exc:
        sys.modules.pop(name, None)
        if isinstance(exc, KeyboardInterrupt):
            raise
        line = _candidate_frame_line(str(path), exc.__traceback__)
        raise ImportFailure(f"raised at import: {type(exc).__name__}: {exc}", file=str(path), line=line) from None
    return module


def _shape(value, what: str, path: str) -> Shape:
    if not (isinstance(value, (tuple, list)) and len(value) == 3 and all(isinstance(d, int) and d > 0 for d in value)):
        raise ContractError(f"{what} must be three positive integers (M, N, K), got {value!r}", file=path)
    return tuple(value)  # type: ignore[return-value]


def read_spec(module: ModuleType, path: str) -> KernelSpec:
    """Validate the declarations of a loaded candidate module."""
    missing = [n for n in ("TARGET", "DTYPE", "SHAPES", "launch") if not hasattr(module, n)]
    if missing:
        raise ContractError(
            f"missing {', '.join(missing)}; a kernel file declares TARGET, DTYPE, SHAPES and a launch() "
            "(see docs/kernel-contract.md), or use --entry/--arg for a file that does not follow the contract",
            file=path)
    target = module.TARGET
    if target not in known_targets():
        raise ContractError(f"TARGET {target!r} is not one of {', '.join(known_targets())}", file=path)
    if not callable(module.launch):
        raise ContractError("launch must be a function launch(a, b, c, **knobs)", file=path)
    shapes = module.SHAPES
    if not isinstance(shapes, (list, tuple)) or not shapes:
        raise ContractError("SHAPES must be a non-empty list of (M, N, K)", file=path)
    shapes = tuple(_shape(s, "each SHAPES entry", path) for s in shapes)
    multiple = _shape(getattr(module, "SHAPE_MULTIPLE", (1, 1, 1)), "SHAPE_MULTIPLE", path)
    knobs = dict(getattr(module, "KNOBS", {}) or {})
    for k, v in knobs.items():
        if not isinstance(k, str) or not isinstance(v, (int, bool)):
            raise ContractError(f"KNOBS must map names to integers, got {k!r}: {v!r}", file=path)
    choices = {k: tuple(v) for k, v in (getattr(module, "KNOB_CHOICES", {}) or {}).items()}
    unknown = set(choices) - set(knobs)
    if unknown:
        raise ContractError(f"KNOB_CHOICES names knobs not in KNOBS: {', '.join(sorted(unknown))}", file=path)
    scales = getattr(module, "SCALES", None)
    if scales not in SCALE_KINDS:
        raise ContractError(f"SCALES must be one of {SCALE_KINDS}, got {scales!r}", file=path)
    fast_accum = getattr(module, "FAST_ACCUM", True)
    if not isinstance(fast_accum, bool):
        raise ContractError(f"FAST_ACCUM must be True or False, got {fast_accum!r}", file=path)
    spec = KernelSpec(path=path, target=target, dtype=str(module.DTYPE),
                      out_dtype=str(getattr(module, "OUT_DTYPE", module.DTYPE)), shapes=shapes,
                      shape_multiple=multiple, knobs=knobs, knob_choices=choices, scales=scales,
                      fast_accum=fast_accum)
    bad = [s for s in shapes if not spec.supports(s)]
    if bad:
        raise ContractError(f"SHAPES entry {bad[0]} is not a multiple of SHAPE_MULTIPLE {multiple}", file=path)
    return spec


def load_candidate(path: str | Path) -> tuple[ModuleType, KernelSpec]:
    module = load_module(path)
    return module, read_spec(module, str(path))
