"""Static policy check of a candidate file, run before any of its code executes.

A candidate earns its score by what its Gluon kernel computes. The rules below reject, by reading the source
(`ast`), the shortcuts an optimizing agent is known to take instead: calling the vendor GEMM, reaching the
operating system or native code, touching the evaluator's timers, random generators or files, and patching
library functions the evaluator relies on. Each violation names its rule and the offending line.

What this cannot see: code built at run time from strings, behaviour hidden behind innocuous names, and
anything in the kernel itself (runtime checks cover that). docs/threat-model.md lists what is enforced.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

RULES: dict[str, str] = {
    "vendor_gemm": "the result must come from the candidate's kernel, not torch/cuBLAS/hipBLASLt matrix multiply",
    "process_network_ffi": "no process control, networking or foreign-function access",
    "evaluator_access": "no reaching into the evaluator, its timers, its random generators or interpreter state",
    "timer_patch": "no patching of clocks, CUDA events or benchmarking functions",
    "rng_seeding": "no seeding or replacing of random generators (inputs must stay unpredictable)",
    "file_io": "no file access outside the candidate's scratch directory",
    "monkeypatch": "no assignment to attributes of imported modules or their objects",
    "dynamic_code": "no eval/exec/__import__ or introspection that would hide what the code does",
    "import_not_allowed": "only triton, torch and a few standard modules may be imported",
    "syntax_error": "the file must parse",
}

ALLOWED_IMPORT_ROOTS = frozenset({
    "__future__", "math", "functools", "typing", "dataclasses", "itertools", "enum", "torch", "triton"})

# Dotted module prefixes, checked before the allowlist (so `torch.multiprocessing` is refused though `torch` is not).
DENIED_MODULES: dict[str, str] = {
    **dict.fromkeys((
        "os", "subprocess", "multiprocessing", "concurrent", "threading", "_thread", "signal", "pty", "socket",
        "ssl", "select", "selectors", "asyncio", "urllib", "http", "requests", "httpx", "aiohttp", "ftplib",
        "smtplib", "ctypes", "_ctypes", "cffi", "cppyy", "mmap", "resource", "shutil", "pathlib", "io", "tempfile",
        "torch.utils.cpp_extension", "torch.multiprocessing", "torch.distributed", "torch.hub", "torch._C",
        "triton._C"), "process_network_ffi"),
    **dict.fromkeys((
        "evaluator", "agent", "tests", "time", "timeit", "gc", "inspect", "sys", "builtins", "importlib",
        "random", "numpy.random", "secrets", "pickle", "marshal", "types", "traceback", "atexit"),
        "evaluator_access"),
}

# Names whose use means "let the vendor library do the GEMM" (torch functions, tensor methods, modules).
GEMM_NAMES = frozenset({
    "matmul", "mm", "bmm", "addmm", "addbmm", "baddbmm", "addmv", "mv", "einsum", "tensordot", "chain_matmul",
    "multi_dot", "linear", "bilinear", "Linear", "Bilinear", "_scaled_mm", "_scaled_grouped_mm", "_grouped_mm",
    "_int_mm", "__matmul__", "__rmatmul__", "__imatmul__", "inner", "dot", "vecdot", "outer"})
# The subset that is also a method on any tensor, so flagged on receivers whose type the check cannot know.
GEMM_METHODS = frozenset({"matmul", "mm", "bmm", "addmm", "addbmm", "baddbmm", "addmv", "mv", "inner", "dot",
                          "outer", "__matmul__", "__rmatmul__", "__imatmul__"})
BLAS_MARKERS = ("blas",)  # cublas, cublasLt, hipblas, hipblaslt, rocblas, preferred_blas_library ...

PROCESS_CALLS = frozenset({
    "system", "popen", "fork", "forkpty", "vfork", "kill", "killpg", "_exit", "abort", "posix_spawn",
    "posix_spawnp", "execl", "execle", "execlp", "execlpe", "execv", "execve", "execvp", "execvpe", "spawnl",
    "spawnle", "spawnlp", "spawnlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe", "startfile", "setsid"})
TIMER_NAMES = frozenset({
    "time", "perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "process_time", "Event",
    "elapsed_time", "record", "synchronize", "do_bench", "do_bench_cudagraph", "Timer", "CUDAGraph", "graph",
    "Stream", "current_stream", "default_stream"})
RNG_NAMES = frozenset({
    "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed", "set_rng_state", "set_rng_state_all",
    "get_rng_state", "fork_rng", "default_generator", "Generator", "rand", "randn", "randint", "randn_like",
    "rand_like", "randint_like", "randperm", "normal", "uniform_", "normal_", "random_", "bernoulli"})
RNG_CALLS = frozenset({"manual_seed", "manual_seed_all", "seed", "seed_all", "set_rng_state",
                       "set_rng_state_all", "fork_rng"})
FILE_CALLS = frozenset({"save", "load", "from_file", "fromfile", "tofile", "loadtxt", "savetxt"})
DYNAMIC_BUILTINS = frozenset({"eval", "exec", "compile", "__import__", "globals", "vars", "breakpoint"})
INTROSPECTION_ATTRS = frozenset({
    "__dict__", "__globals__", "__code__", "__builtins__", "__subclasses__", "__class__", "__bases__", "__mro__",
    "__closure__", "__getattribute__", "__setattr__", "__delattr__", "__loader__", "__spec__", "f_back",
    "f_globals", "f_locals", "gi_frame", "tb_frame"})
JIT_DECORATORS = frozenset({"jit", "constexpr_function", "aggregate"})

# A foreign file (scored statically through --entry, as its authors wrote it) is judged by what it does, not by
# the names it mentions: it may import what it likes (os, pytest, argparse, siblings, importlib) and name
# triton._C in a branch that never runs; evaluator.containment refuses, at run time, the processes, network and
# native code its own code asks for. Read from the source, it is held only to parsing and to keeping out of
# the scorer's own packages (importing them is the one thing that needs no run to judge).
FOREIGN_RULES = frozenset({"evaluator_access", "syntax_error"})
SCORER_PACKAGES = frozenset({"evaluator", "agent", "tests"})


@dataclass(frozen=True)
class Violation:
    """One broken rule: which, why, and where."""

    rule: str
    message: str
    line: int
    source_line: str

    def __str__(self) -> str:
        return f"line {self.line}: [{self.rule}] {self.message}: {self.source_line}"

    def to_dict(self) -> dict:
        return {"rule": self.rule, "message": self.message, "line": self.line, "source_line": self.source_line}


def _denied_rule(module: str) -> str | None:
    for prefix, rule in DENIED_MODULES.items():
        if module == prefix or module.startswith(prefix + "."):
            return rule
    return None


def _has_blas(name: str) -> bool:
    return any(marker in name.lower() for marker in BLAS_MARKERS)


def attribute_chain(node: ast.AST) -> list[str] | None:
    """`a.b.c` -> ["a", "b", "c"]; None for anything that is not a plain attribute chain."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


def is_jit_decorated(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for deco in func.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        chain = attribute_chain(target)
        if chain and chain[-1] in JIT_DECORATORS:
            return True
    return False


class _Checker(ast.NodeVisitor):
    def __init__(self, lines: list[str], foreign: bool = False):
        self.lines = lines
        self.foreign = foreign
        self.violations: list[Violation] = []
        self.imported: dict[str, str] = {}  # local name -> dotted path of the module or object it is bound to
        self.jit_depth = 0

    # -- bookkeeping ----------------------------------------------------------------------------------------

    def add(self, rule: str, node: ast.AST, message: str) -> None:
        line = getattr(node, "lineno", 0)
        if any(v.rule == rule and v.line == line for v in self.violations):
            return  # one report per rule and line is enough to point at it
        source = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        self.violations.append(Violation(rule, message, line, source))

    def resolve(self, node: ast.AST) -> str | None:
        """Dotted path through an import alias (`F.linear` -> `torch.nn.functional.linear`), else None."""
        chain = attribute_chain(node)
        if not chain or chain[0] not in self.imported:
            return None
        return ".".join([self.imported[chain[0]], *chain[1:]])

    # -- imports --------------------------------------------------------------------------------------------

    def check_module(self, node: ast.AST, module: str) -> None:
        rule = _denied_rule(module)
        if self.foreign and module.split(".")[0] not in SCORER_PACKAGES:
            return
        if rule:
            self.add(rule, node, f"import of {module} is not allowed ({RULES[rule]})")
        elif _has_blas(module):
            self.add("vendor_gemm", node, f"import of BLAS binding {module}")
        elif module.split(".")[0] not in ALLOWED_IMPORT_ROOTS:
            self.add("import_not_allowed", node,
                     f"import of {module}; allowed: {', '.join(sorted(ALLOWED_IMPORT_ROOTS - {'__future__'}))}")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.check_module(node, alias.name)
            if alias.asname:
                self.imported[alias.asname] = alias.name
            else:
                root = alias.name.split(".")[0]
                self.imported[root] = root

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.add("import_not_allowed", node, "relative import; a candidate is one self-contained file")
            return
        module = node.module or ""
        self.check_module(node, module)
        for alias in node.names:
            full = f"{module}.{alias.name}"
            if alias.name == "*":
                self.add("dynamic_code", node, f"star import from {module} hides which names are used")
                continue
            self.check_name_use(node, full, alias.name)
            rule = None if _denied_rule(module) else _denied_rule(full)
            if rule:
                self.add(rule, node, f"import of {full} is not allowed ({RULES[rule]})")
            self.imported[alias.asname or alias.name] = full

    # -- names, attributes and calls ------------------------------------------------------------------------

    def check_name_use(self, node: ast.AST, full: str | None, attr: str) -> None:
        """Rules that depend only on which library name is touched."""
        if _has_blas(attr):
            self.add("vendor_gemm", node, f"use of BLAS binding {full or attr}")
        if full is None:
            return
        root = full.split(".")[0]
        if root == "torch" and attr in GEMM_NAMES:
            self.add("vendor_gemm", node, f"{full} computes the GEMM in the vendor library")
        if root == "torch" and (attr == "_C" or "._C." in f"{full}."):
            self.add("process_network_ffi", node, f"{full} reaches torch's native bindings")
        if root == "triton" and "._C" in full:
            self.add("process_network_ffi", node, f"{full} reaches triton's native bindings")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in INTROSPECTION_ATTRS:
            self.add("dynamic_code", node, f"introspection through {node.attr}")
        full = self.resolve(node)
        self.check_name_use(node, full, node.attr)
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "__builtins__":
            self.add("dynamic_code", node, "access to __builtins__")
        elif _has_blas(node.id):
            self.add("vendor_gemm", node, f"use of BLAS binding {node.id}")

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        full = self.resolve(func)
        if isinstance(func, ast.Name):
            self.check_builtin_call(node, func.id)
        elif isinstance(func, ast.Attribute):
            self.check_method_call(node, func, full)
        self.generic_visit(node)

    def check_builtin_call(self, node: ast.Call, name: str) -> None:
        if name in DYNAMIC_BUILTINS and name not in self.imported:
            self.add("dynamic_code", node, f"{name}() hides what the code does")
        elif name == "open" and name not in self.imported:
            self.check_open(node)
        elif name in ("getattr", "setattr", "delattr", "hasattr") and node.args:
            self.check_reflective(node, name)

    def check_open(self, node: ast.Call) -> None:
        path = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "file"), None)
        if not (isinstance(path, ast.Constant) and isinstance(path.value, str)):
            self.add("file_io", node, "open() of a computed path (only literal paths inside the scratch directory)")
        elif path.value.startswith(("/", "~")) or ".." in Path(path.value).parts:
            self.add("file_io", node, f"open() of {path.value!r}, outside the scratch directory")

    def check_reflective(self, node: ast.Call, name: str) -> None:
        target = self.resolve(node.args[0]) if attribute_chain(node.args[0]) else None
        attr = node.args[1] if len(node.args) > 1 else None
        literal = attr.value if isinstance(attr, ast.Constant) and isinstance(attr.value, str) else None
        if literal is None:
            if target is not None:
                self.add("dynamic_code", node, f"{name}() on {target} with a computed attribute name")
            return
        full = f"{target}.{literal}" if target else None
        self.check_name_use(node, full, literal)
        if literal in INTROSPECTION_ATTRS:
            self.add("dynamic_code", node, f"introspection through {literal}")
        if name in ("setattr", "delattr") and target is not None:
            self.check_patch(node, f"{target}.{literal}")

    def check_method_call(self, node: ast.Call, func: ast.Attribute, full: str | None) -> None:
        attr = func.attr
        receiver = self.resolve(func.value) if attribute_chain(func.value) else None
        root = (full or "").split(".")[0]
        if full is None and attr in GEMM_METHODS and not self.jit_depth:
            self.add("vendor_gemm", node, f".{attr}() on a tensor computes the GEMM in the vendor library")
        if root == "os" and attr in PROCESS_CALLS:
            self.add("process_network_ffi", node, f"{full}() controls processes")
        if attr in RNG_CALLS and (root in ("torch", "numpy", "random") or receiver is None) and not self.jit_depth:
            self.add("rng_seeding", node, f"{full or attr}() seeds a random generator")
        if root in ("torch", "numpy") and attr in FILE_CALLS:
            self.add("file_io", node, f"{full}() reads or writes files")

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult) and not self.jit_depth:
            self.add("vendor_gemm", node, "the @ operator on tensors calls the vendor GEMM")
        self.generic_visit(node)

    # -- assignments: aliases and patches -------------------------------------------------------------------

    def check_patch(self, node: ast.AST, full: str) -> None:
        parts = set(full.split("."))
        if parts & TIMER_NAMES:
            self.add("timer_patch", node, f"assignment to {full} patches a timer the evaluator uses")
        elif parts & RNG_NAMES:
            self.add("rng_seeding", node, f"assignment to {full} replaces a random generator")
        else:
            self.add("monkeypatch", node, f"assignment to {full} changes an imported module")

    def check_targets(self, node: ast.AST, targets: list[ast.AST]) -> None:
        for target in targets:
            for sub in ast.walk(target):
                if isinstance(sub, ast.Attribute):
                    full = self.resolve(sub)
                    if full is not None:
                        self.check_patch(node, full)
                    break

    def visit_Assign(self, node: ast.Assign) -> None:
        self.check_targets(node, node.targets)
        value = self.resolve(node.value) if attribute_chain(node.value) else None
        for target in node.targets:
            if isinstance(target, ast.Name):
                if value is not None:
                    self.imported[target.id] = value  # `ev = torch.cuda.Event` makes `ev.x = ...` a patch too
                else:
                    self.imported.pop(target.id, None)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.op, ast.MatMult) and not self.jit_depth:
            self.add("vendor_gemm", node, "the @= operator on tensors calls the vendor GEMM")
        self.check_targets(node, [node.target])
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.check_targets(node, [node.target])
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        self.check_targets(node, node.targets)
        self.generic_visit(node)

    # -- scopes ---------------------------------------------------------------------------------------------

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        jit = is_jit_decorated(node)
        for deco in node.decorator_list:
            self.visit(deco)
        self.jit_depth += jit
        for child in [node.args, *node.body]:
            self.visit(child)
        if node.returns:
            self.visit(node.returns)
        self.jit_depth -= jit

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Global(self, node: ast.Global) -> None:
        for name in node.names:
            if name in self.imported:
                self.add("monkeypatch", node, f"global rebinding of imported name {name}")


def check_source(source: str, filename: str = "<candidate>", foreign: bool = False) -> list[Violation]:
    """Violations in `source`, in line order; an empty list means the policy allows it.

    `foreign` applies only FOREIGN_RULES to a file scored through --entry (the rest is judged while it runs,
    evaluator.containment).
    """
    lines = source.splitlines()
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        line = exc.lineno or 0
        text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
        return [Violation("syntax_error", f"syntax error: {exc.msg}", line, text)]
    checker = _Checker(lines, foreign)
    checker.visit(tree)
    found = [v for v in checker.violations if not foreign or v.rule in FOREIGN_RULES]
    return sorted(found, key=lambda v: (v.line, v.rule))


def check_policy(path: str | Path, foreign: bool = False) -> list[Violation]:
    """Read a candidate file and return every policy violation in it (empty when it may run); `foreign` for
    a file scored through --entry (FOREIGN_RULES only)."""
    path = Path(path)
    return check_source(path.read_text(encoding="utf-8", errors="replace"), str(path), foreign)


def describe(violations: list[Violation]) -> str:
    """One human-readable message for a record: the first violation in full, then a count of the rest."""
    if not violations:
        return "policy: no violations"
    first = violations[0]
    more = f" (+{len(violations) - 1} more)" if len(violations) > 1 else ""
    return f"policy violation [{first.rule}] at line {first.line}: {first.message}: {first.source_line}{more}"


def record_fields(violations: list[Violation]) -> dict:
    """The evaluation record's fields for a refused file: status, the `describe` message, the first line, all.

    A file that does not parse is a `syntax_error`, not a policy violation: nothing in it was judged.
    """
    first = violations[0]
    if first.rule == "syntax_error":
        return {"status": "syntax_error", "message": f"{first.message}: {first.source_line}", "line": first.line,
                "policy": {"violations": [first.to_dict()]}}
    return {"status": "policy_violation", "message": describe(violations), "line": first.line,
            "policy": {"violations": [v.to_dict() for v in violations]}}
