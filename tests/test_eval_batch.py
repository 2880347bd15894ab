"""`nearpeak eval PATH... [--jobs N] [--jsonl OUT] [--resume]`: many files, each in its own sandboxed process."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter

import pytest
from batch_files import write_batch_dir
from conftest import ROOT, TEST_KERNELS

from evaluator.batch import done_files, expand_paths, sandboxed_seconds, summary_table
from evaluator.errors import EXIT_CANDIDATE, EXIT_USAGE, UsageError


def nearpeak(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agent.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          check=False, timeout=timeout)


def read_jsonl(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_paths_directories_and_globs_expand_to_kernel_files_once(tmp_path):
    (tmp_path / "sub").mkdir()
    for name in ("a.py", "b.py", "sub/c.py", "_helper.py", "conftest.py", "notes.txt"):
        (tmp_path / name).write_text("")
    files = expand_paths([str(tmp_path), str(tmp_path / "*.py"), str(tmp_path / "a.py")])
    assert [p.replace(str(tmp_path) + "/", "") for p in files] == ["a.py", "b.py", "sub/c.py"]
    with pytest.raises(UsageError, match="matches no kernel file"):
        expand_paths([str(tmp_path / "*.cu")])


def test_done_files_ignores_a_torn_last_line(tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_text(json.dumps({"file": str(tmp_path / "a.py"), "status": "ok"}) + "\n{\"file\": \"b.p")
    assert done_files(out) == {(tmp_path / "a.py").resolve()}
    assert done_files(tmp_path / "missing.jsonl") == set()


def _record(name: str, status: str, registers=None, efficiency=None, tflops=None) -> dict:
    static = {"kernel": "k", "registers": registers, "spills": 0, "occupancy": 2, "estimated_efficiency": efficiency}
    if tflops is not None:
        static["estimated_tflops"] = tflops
    return {"file": name, "status": status, "target": "gfx950", "static": static if status == "ok" else None}


def test_summary_ranks_by_estimated_tflops_and_falls_back_to_efficiency():
    records = [_record("a.py", "ok", 128, 0.5, 900.0), _record("b.py", "ok", 256, 0.7, 800.0),
               _record("c.py", "timeout"), _record("d.py", "crashed"), _record("e.py", "timeout")]
    text = summary_table(records)
    assert text.splitlines()[0] == "5 records: ok 2, timeout 2, crashed 1"
    best = text[text.index("best by estimated TFLOP/s"):text.index("top register users")]
    assert best.index("a.py") < best.index("b.py")  # 900 before 800 although b's efficiency is higher
    heavy = text[text.index("top register users"):]
    assert heavy.index("b.py") < heavy.index("a.py")
    for record in records:
        if record["static"]:
            del record["static"]["estimated_tflops"]
    fallback = summary_table(records)
    assert "no estimated_tflops in these records" in fallback
    best = fallback[fallback.index("best by"):fallback.index("top register users")]
    assert best.index("b.py") < best.index("a.py")


@pytest.mark.slow  # several sandboxed compiles, twice
def test_batch_writes_one_line_per_file_and_resume_skips_what_is_done(tmp_path):
    folder = tmp_path / "cands"
    folder.mkdir()
    shutil.copy(TEST_KERNELS / "small_gfx950.py", folder / "one.py")
    shutil.copy(TEST_KERNELS / "no_contract.py", folder / "two.py")
    out = tmp_path / "out.jsonl"
    first = nearpeak("eval", str(folder), "--jsonl", str(out), "--jobs", "2")
    assert first.returncode == 0, first.stderr
    records = read_jsonl(out)
    assert sorted((r["file"].rsplit("/", 1)[-1], r["status"]) for r in records) == [("one.py", "ok"),
                                                                                   ("two.py", "contract_error")]
    assert "2 records: ok 1, contract_error 1" in first.stdout and "top register users" in first.stdout
    shutil.copy(TEST_KERNELS / "foreign_wrong_target.py", folder / "three.py")  # TARGET gfx950, no launch
    again = nearpeak("eval", str(folder / "*.py"), "--jsonl", str(out), "--resume")
    # three.py has no contract: its one host function is guessed as the entry, which needs arguments; the only
    # file of this run did not score, so the batch exits 1
    assert again.returncode == EXIT_CANDIDATE, again.stderr
    assert "[1/1]" in again.stderr and "three.py: call_error" in again.stderr and "one.py" not in again.stderr
    assert "no file scored" in again.stderr
    assert len(read_jsonl(out)) == 3


def test_batch_flags_checked_before_anything_runs(tmp_path):
    out = nearpeak("eval", str(TEST_KERNELS / "small_gfx950.py"), str(TEST_KERNELS / "small_sm90.py"), "--run")
    assert out.returncode == EXIT_USAGE and "--run does not apply to batch scoring" in out.stderr
    out = nearpeak("eval", str(tmp_path / "*.py"))
    assert out.returncode == EXIT_USAGE and "matches no kernel file" in out.stderr
    out = nearpeak("eval", str(TEST_KERNELS / "small_gfx950.py"), "--jobs", "0")
    assert out.returncode == EXIT_USAGE and "--jobs must be at least 1" in out.stderr


@pytest.mark.slow
def test_thirty_files_with_hanging_crashing_and_invalid_ones(tmp_path):
    expected = write_batch_dir(tmp_path / "batch")
    out_file = tmp_path / "out.jsonl"
    limit = 40
    out = nearpeak("eval", str(tmp_path / "batch"), "--jobs", "2", "--jsonl", str(out_file), "--timeout", str(limit),
                   "--json")
    assert out.returncode == 0, out.stderr
    records = read_jsonl(out_file)
    assert [json.loads(line) for line in out.stdout.splitlines()] == records  # --json prints the same lines
    assert len({r["file"] for r in records}) == len(records) == 30
    assert Counter(r["status"] for r in records) == expected
    for record in records:
        if record["status"] == "timeout":
            assert limit <= sandboxed_seconds(record) < limit + 10
        if record["status"] == "crashed":
            assert "LLVM ERROR" in record["message"]
    summary = out.stderr[out.stderr.index("30 records:"):]
    assert "ok 24" in summary and "timeout 2" in summary and "crashed 2" in summary
