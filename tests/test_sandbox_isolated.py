"""evaluator.integrity and evaluator.isolated: digests of the evaluator, records from sandbox verdicts."""
from __future__ import annotations

import shutil
from pathlib import Path

from evaluator import api, integrity
from evaluator.batch import ScoreOptions, score_file
from evaluator.isolated import _runtime_failed, run_guarded
from evaluator.request import EvalRequest
from evaluator.sandbox import run_isolated

CANDIDATES = "tests/adversarial/candidates"


def test_snapshot_sees_modified_added_and_removed_files(tmp_path):
    tree = tmp_path / "ev"
    shutil.copytree(integrity.EVALUATOR_ROOT, tree, ignore=shutil.ignore_patterns("__pycache__"))
    before = integrity.snapshot(tree)
    assert before.changes(integrity.snapshot(tree)) == ()
    (tree / "api.py").write_text((tree / "api.py").read_text() + "\n# edited\n")
    (tree / "new.py").write_text("X = 1\n")
    (tree / "errors.py").unlink()
    (tree / "notes.txt").write_text("not python: not watched")
    assert before.changes(integrity.snapshot(tree)) == ("api.py", "errors.py", "new.py")


def test_snapshot_covers_the_whole_evaluator_package():
    files = integrity.snapshot().files
    assert {"api.py", "sandbox.py", "sandbox_child.py", "policy.py", "isolated.py"} <= set(files)
    assert any(name.startswith("runtime/") for name in files)


def test_run_guarded_reports_a_tampered_tree(tmp_path):
    tree = tmp_path / "ev"
    shutil.copytree(integrity.EVALUATOR_ROOT, tree, ignore=shutil.ignore_patterns("__pycache__"))
    clean = run_guarded("tests.adversarial.misbehave:echo", {}, timeout_s=30, watch_root=tree)
    assert clean.result.ok and clean.tampered == ()
    dirty = run_guarded("tests.adversarial.misbehave:tamper", {"path": str(tree / "policy.py")}, timeout_s=30,
                        watch_root=tree)
    assert dirty.result.ok and dirty.tampered == ("policy.py",)


def test_policy_violation_record_runs_nothing():
    record = api.evaluate(f"{CANDIDATES}/policy_segfault.py", timeout_s=30)
    assert record["status"] == "policy_violation" and record["line"] == 2
    assert "sandbox" not in record
    assert record["policy"]["violations"][0]["rule"] == "process_network_ffi"


def test_missing_file_is_not_found():
    assert api.evaluate("no/such/kernel.py")["status"] == "not_found"


def test_static_record_comes_back_with_its_sandbox_stage():
    record = api.evaluate(f"{CANDIDATES}/honest_sm90.py", run=False, timeout_s=300)
    assert record["status"] == "ok", record["message"]
    assert record["target"] == "sm90" and record["static"]
    assert [s["stage"] for s in record["sandbox"]] == ["static"]
    assert record["policy"] == {"violations": []}


def test_timeout_record_says_which_stage():
    record = api.evaluate(f"{CANDIDATES}/sandbox_hang_at_import.py", timeout_s=6)
    assert record["status"] == "timeout", record["message"]
    assert record["message"].startswith("static stage did not finish within 6 s")
    assert record["sandbox"][0]["verdict"] == "timeout"


def test_eval_scorer_and_evaluate_share_one_sandboxed_static_stage():
    """`nearpeak eval`'s scorer and the loop's evaluation run the static stage through the same wrapper: the
    same record, field for field, for a file that hangs; only `file` is kept as the scorer was given it, and
    the scorer names the TARGET the file declares (it reads it before anything runs)."""
    path = f"{CANDIDATES}/sandbox_hang_at_import.py"
    [scored] = score_file(path, ScoreOptions(timeout_s=4))
    evaluated = api.evaluate(path, run=False, timeout_s=4)
    assert scored["file"] == path and evaluated["file"] == str(Path(path).resolve())
    for record in (scored, evaluated):
        assert record["status"] == "timeout", record["message"]
        assert record["message"].startswith("static stage did not finish within 4 s")
        assert [s["stage"] for s in record["sandbox"]] == ["static"] and record["sandbox"][0]["wall_s"] >= 4
    assert scored["target"] == "sm90" and evaluated["target"] is None and set(scored) == set(evaluated)
    ignored = {"file": None, "target": None, "sandbox": None}
    assert {**scored, **ignored} == {**evaluated, **ignored}


def test_runtime_section_status_decides():
    assert _runtime_failed({"status": "ok", "verdict": "correct (correct on 1x1x1); 1.0 TFLOP/s"}) is None
    assert _runtime_failed({"status": "unwritten", "verdict": "1x1x1: unwritten"}) == "unwritten"
    assert _runtime_failed({"verdict": "correct"}) is None
    assert _runtime_failed({"verdict": "no_device"}) == "no_device"


def test_run_without_a_gpu_is_no_device():
    record = api.evaluate(f"{CANDIDATES}/honest_sm90.py", run=True, timeout_s=300)
    if record.get("runtime"):
        return  # a GPU of the target is here: nothing to check about its absence
    assert record["status"] == "no_device" and "sm90" in record["message"]


def test_runtime_stage_reports_a_missing_gpu_only_when_required():
    from evaluator.runtime.device import detect_target

    if detect_target() == "sm90":
        return
    path = str(Path(CANDIDATES, "honest_sm90.py").resolve())
    args = {"target": "sm90", "seed": 1}
    required = run_isolated("evaluator.stages:runtime_stage",
                            {"path": path, "request": EvalRequest(**args, run=True).to_dict()}, timeout_s=120)
    assert required.ok and required.value["status"] == "no_device"
    optional = run_isolated("evaluator.stages:runtime_stage",
                            {"path": path, "request": EvalRequest(**args, run=None).to_dict()}, timeout_s=120)
    assert optional.ok and optional.value is None


def test_compare_refuses_a_candidate_against_the_policy_before_anything_runs():
    from evaluator.api import compare

    result = compare(f"{CANDIDATES}/policy_matmul_in_launch.py", f"{CANDIDATES}/honest_sm90.py")
    assert result["accepted"] is False and result["error"] == "policy_violation"
    assert result["message"].startswith("candidate: policy violation [vendor_gemm]") and "sandbox" not in result


def test_compare_runs_sandboxed_and_says_when_there_is_no_gpu():
    from evaluator.api import compare
    from evaluator.runtime.device import detect_target

    if detect_target() == "sm90":
        return
    result = compare(f"{CANDIDATES}/honest_sm90.py", f"{CANDIDATES}/honest_sm90.py", timeout_s=120)
    assert result["accepted"] is False and result["error"] == "no_device"
    assert [s["stage"] for s in result["sandbox"]] == ["compare"] and result["seed"] is not None


def test_the_hardened_path_never_imports_the_public_api():
    """api -> isolated -> stages, one way: the stage bodies and the parent side do not reach back into api."""
    import ast

    root = Path(integrity.EVALUATOR_ROOT)
    for name in ("isolated.py", "stages.py", "sandbox.py", "sandbox_child.py", "provenance.py", "batch.py"):
        tree = ast.parse((root / name).read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert "api" not in imported and "evaluator.api" not in imported, name
