"""Layering of agent/ and evaluator/: no import cycles, target folders reached only through the registry, and
no target named outside evaluator/targets/."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("agent", "evaluator")
FAMILY_AND_TARGET_HOME = "evaluator.targets"
# Target-neutral modules of the targets package that anyone may import.
NEUTRAL = {"evaluator.targets", "evaluator.targets.base", "evaluator.targets.loop_estimate"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _module_level(node: ast.AST, functions: bool = False):
    """Nodes executed when the module is imported: not `if TYPE_CHECKING:` blocks, and not function bodies
    unless `functions` (then: every node that can run, at import or when called)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and not functions:
            continue
        if isinstance(child, ast.If) and _is_type_checking(child):
            continue
        yield child
        yield from _module_level(child, functions)


def _imports(name: str, path: Path, modules: dict[str, Path], top_level_only: bool, typing: bool = True) -> set[str]:
    """Modules of agent/ and evaluator/ that `name` imports (at module level only, if `top_level_only`; leaving
    out `if TYPE_CHECKING:` imports, if not `typing`)."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    if top_level_only or not typing:
        nodes = list(_module_level(tree, functions=not top_level_only))
    else:
        nodes = list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            submodules = {f"{target}.{alias.name}" for alias in node.names} & modules.keys()
            found |= submodules                     # `from pkg import submodule` imports the submodule
            if len(submodules) < len(node.names):   # ... and a name defined in pkg itself imports pkg
                found.add(target)
    return {m for m in found if m in modules and m != name}


def _graph(top_level_only: bool, typing: bool = True) -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules, top_level_only, typing) for name, path in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                return stack[stack.index(dep):] + [dep]
            if dep not in state and (found := visit(dep)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_graph_is_built_from_real_imports():
    graph = _graph(top_level_only=True)
    assert "evaluator.targets" in graph["evaluator.static"] and "evaluator.records" in graph["evaluator.targets.amd.static"]


def test_no_import_cycles_at_module_level():
    cycle = _cycle(_graph(top_level_only=True))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_import_cycles_through_function_level_imports_either():
    """A function-level import that closes a cycle only hides it (type-checking imports aside: they never run)."""
    cycle = _cycle(_graph(top_level_only=False, typing=False))
    assert cycle is None, "import cycle through a function-level import: " + " -> ".join(cycle)


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_only_the_targets_package_imports_a_target_or_family_folder():
    """Outside evaluator/targets/, code asks the registry (get_target) for a target; it never imports one."""
    offenders = [f"{name} imports {dep}" for name, deps in _graph(top_level_only=False).items()
                 if not name.startswith(FAMILY_AND_TARGET_HOME + ".") and name != FAMILY_AND_TARGET_HOME
                 for dep in deps if dep.startswith(FAMILY_AND_TARGET_HOME + ".") and dep not in NEUTRAL]
    assert not offenders, "\n".join(offenders)


def test_target_folders_do_not_import_each_other():
    """A target folder may use its family's toolchain (amd/, nvidia/) but never another target's folder."""
    graph = _graph(top_level_only=False)
    families = {"amd", "nvidia"}
    folders = {name.split(".")[2] for name in graph if name.startswith("evaluator.targets.") and name.count(".") >= 2}
    targets = folders - families - {"base", "loop_estimate"}
    offenders = [f"{name} imports {dep}" for name, deps in graph.items() for dep in deps
                 if name.startswith("evaluator.targets.") and dep.startswith("evaluator.targets.")
                 and name.split(".")[2] != dep.split(".")[2] and dep.split(".")[2] in targets]
    assert targets >= {"gfx942", "gfx950", "sm90"} and not offenders, "\n".join(offenders)


def test_no_code_outside_the_targets_package_names_a_target():
    """A target name as a string in code (a comparison, a default, a dict key) outside evaluator/targets/ means
    a switch on the target that belongs in its folder. Docstrings and comments may name targets as examples."""
    from evaluator.targets import known_targets

    names = set(known_targets())
    offenders = []
    for name, path in _modules().items():
        if name == FAMILY_AND_TARGET_HOME or name.startswith(FAMILY_AND_TARGET_HOME + "."):
            continue
        tree = ast.parse(path.read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                      and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
        offenders += [f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
                      if isinstance(node, ast.Constant) and node.value in names and id(node) not in docstrings]
    assert not offenders, "\n".join(offenders)
