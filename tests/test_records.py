"""The typed records match what producers write, what consumers read, and what docs/eval-schema.md says."""
from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest
import torch
from conftest import TEST_KERNELS

from evaluator import provenance
from evaluator.compile import compile_candidate
from evaluator.contract import load_candidate
from evaluator.records import EvaluationRecord, RuntimeRecord, StaticRecord, field_names
from evaluator.runtime import evaluate
from evaluator.runtime.device import DeviceInfo
from evaluator.static import analyze
from evaluator.targets import all_targets, get_target
from evaluator.targets.amd import amdgcn
from evaluator.targets.loop_estimate import LoopEstimate
from evaluator.targets.nvidia import sass

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = (ROOT / "docs" / "eval-schema.md").read_text()

TARGET_FIELDS = frozenset(f for t in all_targets() for f in t.toolchain.static_fields)
HOT_LOOP_FIELDS = frozenset({"header", "depth", "excerpt", "view", "mfma_cycles", *amdgcn.instruction_mix([]),
                             *sass.instruction_mix([])})
ESTIMATE_FIELDS = frozenset(LoopEstimate(0, 1.0, 0.0, "issue", {}).to_dict())
# What a variable (or a key read off another record) holds, by the name the code gives it.
READERS = {
    "record": field_names(EvaluationRecord),
    "static": field_names(StaticRecord) | TARGET_FIELDS, "st": field_names(StaticRecord) | TARGET_FIELDS,
    "record[static]": field_names(StaticRecord) | TARGET_FIELDS,
    "runtime": field_names(RuntimeRecord), "rt": field_names(RuntimeRecord),
    "record[runtime]": field_names(RuntimeRecord),
    "estimate": ESTIMATE_FIELDS, "est": ESTIMATE_FIELDS, "st[estimate]": ESTIMATE_FIELDS,
    "static[estimate]": ESTIMATE_FIELDS,
    "loop": HOT_LOOP_FIELDS, "st[hot_loop]": HOT_LOOP_FIELDS, "static[hot_loop]": HOT_LOOP_FIELDS,
}
# Modules where `record` is the runtime section being built.
RUNTIME_BUILDERS = {"evaluator/runtime/evaluate.py"}


def _holder(node: ast.AST) -> str | None:
    """`record`, `record[static]` for record["static"] / record.get("static") / (record.get("static") or {})."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.BoolOp):
        return _holder(node.values[0])
    key_of = _key_read(node)
    if key_of:
        inner, key = key_of
        base = _holder(inner)
        return f"{base}[{key}]" if base else None
    return None


def _key_read(node: ast.AST) -> tuple[ast.AST, str] | None:
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and isinstance(node.slice, ast.Constant) \
            and isinstance(node.slice.value, str):
        return node.value, node.slice.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args \
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
        return node.func.value, node.args[0].value
    return None


def record_reads() -> list[tuple[str, int, str, str]]:
    """(file, line, holder, key) for every constant-key read of a record-holding variable in agent/ and evaluator/."""
    reads = []
    for path in sorted([*ROOT.glob("agent/**/*.py"), *ROOT.glob("evaluator/**/*.py")]):
        rel = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text())):
            found = _key_read(node)
            if not found:
                continue
            holder = _holder(found[0])
            if rel in RUNTIME_BUILDERS and holder == "record":
                holder = "runtime"
            if holder in READERS:
                reads.append((rel, node.lineno, holder, found[1]))
    return reads


def test_consumers_read_only_fields_a_record_has():
    reads = record_reads()
    assert len(reads) > 50, "the scan found too few record reads to mean anything"
    unknown = [f"{f}:{line}: {holder}[{key!r}]" for f, line, holder, key in reads if key not in READERS[holder]]
    assert not unknown, "reads of fields no record has:\n" + "\n".join(unknown)


def test_the_scan_catches_a_misnamed_runtime_read(tmp_path):
    # The bug this test exists for: the runtime wrote one name and agent/figures.py read another.
    tree = ast.parse('runtime = record.get("runtime") or {}\nx = runtime.get("tensor_pipe_pct")\n')
    keys = [(_holder(k[0]), k[1]) for n in ast.walk(tree) if (k := _key_read(n))]
    assert ("runtime", "tensor_pipe_pct") in keys and "tensor_pipe_pct" not in READERS["runtime"]


@pytest.mark.parametrize("name, target", [("small_gfx950.py", "gfx950"), ("small_sm90.py", "sm90")])
def test_static_records_hold_only_documented_fields(name, target):
    tgt = get_target(target)
    module, spec = load_candidate(TEST_KERNELS / name)
    data = analyze(compile_candidate(module, spec, tgt), tgt)
    record = StaticRecord.from_dict(data, tgt.toolchain.static_fields)
    assert record.undocumented == {}
    assert set(record.details) == set(tgt.toolchain.static_fields)
    assert record.to_dict() == data
    assert set(record.hot_loop) <= HOT_LOOP_FIELDS and set(record.estimate) == ESTIMATE_FIELDS


def test_runtime_record_holds_only_documented_fields(tmp_path, monkeypatch):
    info = DeviceInfo(target="sm90", name="CPU stand-in", arch="cpu", backend="cuda", index=0, multiprocessors=1,
                      memory_bytes=0, l2_bytes=2 ** 20)
    monkeypatch.setattr(evaluate, "require_device", lambda target: info)
    monkeypatch.setattr(evaluate, "_device", lambda info: torch.device("cpu"))
    monkeypatch.setattr(evaluate, "read_driver_and_clocks", lambda backend, index: (None, {}))
    monkeypatch.setattr(evaluate, "UNTIMED_CHECK_CALLS", 10)
    # The stand-in computes with torch on the CPU, which the provenance trace refuses: trust it here.
    monkeypatch.setattr(evaluate, "_trace_launches", lambda module, path: provenance.Trace(str(path)))
    path = tmp_path / "candidate.py"
    path.write_text(textwrap.dedent('''
        TARGET = "sm90"
        DTYPE = "bfloat16"
        OUT_DTYPE = "bfloat16"
        SHAPES = [(128, 128, 64)]
        SHAPE_MULTIPLE = (64, 64, 32)
        KNOBS = {}
        def launch(a, b, c):
            c.copy_((a.float() @ b.float().T).to(c.dtype))
    '''))
    data = evaluate.runtime_evaluate(path, seed=3, timing_budget_s=0.02)
    record = RuntimeRecord.from_dict(data)
    assert record.status == "ok" and record.undocumented == {}
    assert set(data) == field_names(RuntimeRecord) and record.to_dict() == data


def test_evaluation_record_round_trips_and_keeps_unknown_keys():
    data = {"schema": "nearpeak.eval/2", "status": "ok", "target": "sm90", "static": {"registers": 1},
            "from_the_future": 1}
    record = EvaluationRecord.from_dict(data)
    assert record.undocumented == {"from_the_future": 1}
    assert {k: v for k, v in record.to_dict().items() if v is not None} == data


def test_every_record_field_is_documented():
    documented = set(re.findall(r"`([a-z_0-9]+)`", SCHEMA))
    fields = field_names(EvaluationRecord) | field_names(StaticRecord) | field_names(RuntimeRecord) | TARGET_FIELDS
    assert not fields - documented, f"fields missing from docs/eval-schema.md: {sorted(fields - documented)}"
