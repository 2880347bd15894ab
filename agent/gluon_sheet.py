"""A short Gluon API sheet, generated from the installed Triton for the names a ladder's stages use.

The model should call the functions and build the layouts that exist in the Triton it is compiled with
(the sheet names that release), with their real signatures. So the sheet is read from the reference stages'
source (which Gluon names they use, through `gl.` attribute chains, `from ... import` lines and the stages'
version aliases `new = getattr(module, "new_name", None) or module.old_name`) and resolved against the installed
modules: vendor-specific functions (the `amd` / `nvidia` subpackages) and every layout class, plus shared-memory
allocation, each with its signature and the first line of its docstring. Of a version alias only the name the
installed release offers is listed.
"""
from __future__ import annotations

import ast
import functools
import importlib
import inspect
from collections.abc import Iterable, Iterator

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


def _is_getattr(node: ast.AST) -> bool:
    """`getattr(owner, "literal name", ...)`."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
        and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)


def _path(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """The dotted Gluon path of an attribute chain (`tma.async_load`), or of `getattr(tma, "async_load", ...)`."""
    if _is_getattr(node):
        owner = _path(node.args[0], aliases)
        return f"{owner}.{node.args[1].value}" if owner else None
    chain = attribute_chain(node) if isinstance(node, (ast.Attribute, ast.Name)) else None
    return ".".join([aliases[chain[0]], *chain[1:]]) if chain and chain[0] in aliases else None


def _trees(sources: Iterable[str]) -> Iterator[ast.Module]:
    for source in sources:
        try:
            yield ast.parse(source)
        except SyntaxError:
            continue


def used_names(sources: Iterable[str]) -> list[str]:
    """Full dotted paths of the Gluon names the sources use (longest attribute chains and literal `getattr`s),
    sorted."""
    found = set()
    for tree in _trees(sources):
        aliases = _aliases(tree)
        parents = {id(child) for node in ast.walk(tree)
                   for child in ([node.value] if isinstance(node, ast.Attribute) else
                                 node.args[:1] if _is_getattr(node) else [])}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Attribute, ast.Name, ast.Call)) and id(node) not in parents:
                path = _path(node, aliases)
                if path:
                    found.add(path)
    return sorted(found)


def version_alternatives(sources: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Each version alias of the sources (`x = getattr(m, "new", None) or m.old`) as every name it may resolve
    to, by its last (the oldest) alternative: {"...tma.async_copy_global_to_shared": ("...tma.async_load",
    "...tma.async_copy_global_to_shared")}."""
    groups = {}
    for tree in _trees(sources):
        aliases = _aliases(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
                paths = tuple(_path(value, aliases) for value in node.values)
                if len(paths) > 1 and all(paths):
                    groups[paths[-1]] = paths
    return groups


def installed_names(sources: Iterable[str]) -> list[str]:
    """`used_names` with each version alias reduced to the first of its names the installed Triton has."""
    sources = tuple(sources)
    drop = set()
    for group in version_alternatives(sources).values():
        chosen = next((path for path in group if _resolve(path) is not None), None)
        drop |= {path for path in group if path != chosen}
    return [path for path in used_names(sources) if path not in drop]


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
    rows = []
    for path in installed_names(sources):
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
    return (f"(installed Triton {installed_triton()}; names the reference stages use, `gl` = "
            f"{GLUON}.language)\n" + "\n".join(rows[:SHEET_LIMIT]) + more)


def installed_triton() -> str:
    """The installed Triton's version ("3.9.0"): the release the prompt tells the model it writes Gluon for."""
    import triton

    return triton.__version__


def api_sheet(sources: Iterable[str]) -> str:
    """The sheet for the Gluon names used in `sources` (e.g. a ladder's stage files); "" if none resolve."""
    return _sheet(tuple(sources))
