"""Reading and rewriting a kernel file's module-level declarations without importing it.

Proposers look at a candidate before anything runs it (the evaluator is the only place that imports kernel
code), so declarations are read from the syntax tree with `ast.literal_eval`.
"""
from __future__ import annotations

import ast
import hashlib
import json


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _assignment(tree: ast.Module, name: str) -> ast.Assign | ast.AnnAssign | None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return node
    return None


def declaration(source: str, name: str, default=None):
    """The literal value of module-level `name = <literal>`, or `default` when absent or not a literal."""
    try:
        node = _assignment(ast.parse(source), name)
    except SyntaxError:
        return default
    if node is None or node.value is None:
        return default
    try:
        return ast.literal_eval(node.value)
    except ValueError:
        return default


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
    node = _assignment(ast.parse(source), "KNOBS")
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
