"""Reading and rewriting a kernel file's module-level declarations without importing it.

Proposers look at a candidate before anything runs it (the evaluator is the only place that imports kernel
code), so declarations are read from the syntax tree with `ast.literal_eval`.
"""
from __future__ import annotations

import ast
import difflib
import hashlib
import json

from evaluator.contract import assignment, declaration

__all__ = ["compact_diff", "declaration", "knob_free_hash", "module_docstring", "replace_knobs", "sha256"]


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def module_docstring(source: str) -> str | None:
    try:
        return ast.get_docstring(ast.parse(source))
    except SyntaxError:
        return None


def _span(source: str, node: ast.AST) -> tuple[int, int]:
    """Character offsets of a node in `source` (ast positions are per line, columns in UTF-8 bytes)."""
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(lineno: int, col: int) -> int:
        return starts[lineno - 1] + len(lines[lineno - 1].encode()[:col].decode())

    return offset(node.lineno, node.col_offset), offset(node.end_lineno, node.end_col_offset)


def replace_knobs(source: str, knobs: dict[str, int]) -> str:
    """Rewrite the value of the module-level `KNOBS = {...}` dict, keeping the rest of the file untouched."""
    node = assignment(ast.parse(source), "KNOBS")
    if node is None or node.value is None:
        raise ValueError("the kernel has no module-level KNOBS = {...} to rewrite")
    start, end = _span(source, node.value)
    literal = "{" + ", ".join(f"{json.dumps(k)}: {int(v)}" for k, v in knobs.items()) + "}"
    return source[:start] + literal + source[end:]


def knob_free_hash(source: str) -> str:
    """Hash of the kernel with its KNOBS value blanked: the same kernel under any configuration."""
    try:
        return sha256(replace_knobs(source, {}))
    except (ValueError, SyntaxError):
        return sha256(source)


def compact_diff(old: str, new: str, context: int = 1, limit: int = 40) -> str:
    """A unified diff of two kernel versions with little context, cut to `limit` lines (the cut is counted)."""
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=context))[2:]
    if len(lines) > limit:
        lines = lines[:limit] + [f"... ({len(lines) - limit} more diff lines)"]
    return "\n".join(lines)
