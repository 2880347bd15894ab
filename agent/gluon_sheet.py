"""A short Gluon API sheet, generated from the installed Triton for the names a ladder's stages use.

The model should call the functions and build the layouts that exist in the Triton it is compiled with
(3.6.0 here), with their real signatures. So the sheet is read from the reference stages' source (which
Gluon names they use, through `gl.` attribute chains and `from ... import` lines) and resolved against the
installed modules: vendor-specific functions (the `amd` / `nvidia` subpackages) and every layout class,
plus shared-memory allocation, each with its signature and the first line of its docstring.
"""
from __future__ import annotations

import ast
import functools
import importlib
import inspect
from collections.abc import Iterable

from evaluator.policy import attribute_chain

GLUON = "triton.experimental.gluon"
VENDOR_PARTS = ("amd", "nvidia")            # Triton's vendor subpackages of Gluon
ALSO_LISTED = ("allocate_shared_memory", "warp_specialize", "convert_layout")
SHEET_LIMIT = 40


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> dotted path, for imports from Gluon."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(GLUON):
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(GLUON):
                    names[alias.asname or alias.name.split(".")[0]] = alias.name
    return names


def used_names(sources: Iterable[str]) -> list[str]:
    """Full dotted paths of the Gluon names the sources use (longest attribute chains), sorted."""
    found = set()
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        aliases = _aliases(tree)
        parents = {id(child) for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                   for child in [node.value]}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Attribute, ast.Name)) and id(node) not in parents:
                chain = attribute_chain(node)
                if chain and chain[0] in aliases:
                    found.add(".".join([aliases[chain[0]], *chain[1:]]))
    return sorted(found)


def _resolve(path: str):
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def _signature(obj) -> str:
    try:
        params = [p for p in inspect.signature(obj).parameters.values() if not p.name.startswith("_")]
    except (TypeError, ValueError):
        return "(...)"
    return "(" + ", ".join(str(p.replace(annotation=inspect.Parameter.empty)) for p in params) + ")"


def _first_doc_line(obj) -> str:
    """The docstring's first sentence (its first paragraph, up to the first full stop)."""
    paragraph = (inspect.getdoc(obj) or "").strip().split("\n\n")[0]
    text = " ".join(paragraph.split())
    return text.split(". ")[0].rstrip(".")


def _listed(path: str) -> bool:
    last = path.rsplit(".", 1)[-1]
    inner = path[len(GLUON) + 1:].split(".")
    return any(p in VENDOR_PARTS for p in inner) or last.endswith("Layout") or last in ALSO_LISTED


def _short(path: str) -> str:
    """`gl.`-relative spelling: triton.experimental.gluon.language.amd.cdna4.mfma -> gl.amd.cdna4.mfma."""
    language = f"{GLUON}.language."
    return "gl." + path[len(language):] if path.startswith(language) else path


@functools.cache
def _sheet(sources: tuple[str, ...]) -> str:
    import triton

    rows = []
    for path in used_names(sources):
        if not _listed(path):
            continue
        obj = _resolve(path)
        if obj is None or inspect.ismodule(obj) or not callable(obj):
            continue
        doc = _first_doc_line(obj)
        rows.append(f"- {_short(path)}{_signature(obj)}" + (f": {doc}" if doc else ""))
    if not rows:
        return ""
    more = f"\n- ... {len(rows) - SHEET_LIMIT} more" if len(rows) > SHEET_LIMIT else ""
    return (f"(installed Triton {triton.__version__}; names the reference stages use, `gl` = "
            f"{GLUON}.language)\n" + "\n".join(rows[:SHEET_LIMIT]) + more)


def api_sheet(sources: Iterable[str]) -> str:
    """The sheet for the Gluon names used in `sources` (e.g. a ladder's stage files); "" if none resolve."""
    return _sheet(tuple(sources))
