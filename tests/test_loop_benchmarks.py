"""The loop's throughput and scaling benchmarks, run for real on a small static (CPU) tune run."""
from __future__ import annotations

import json
import re
import sys

import pytest
from agent_support import REPO, V00, need

sys.path.insert(0, str(REPO / "benchmarks"))

import loop_scaling
import loop_throughput


@pytest.fixture(scope="module")
def start(tmp_path_factory):
    source = need(V00).read_text()
    source = re.sub(r"^KNOB_CHOICES = .*$", 'KNOB_CHOICES = {"BLOCK_K": [64, 32], "num_warps": [4, 8]}', source,
                    flags=re.MULTILINE)
    path = tmp_path_factory.mktemp("bench") / "v00_tune.py"
    path.write_text(source)
    return path


@pytest.mark.slow
def test_throughput_splits_each_candidates_seconds_by_phase(start, tmp_path, capsys):
    out = tmp_path / "throughput.json"
    code = loop_throughput.main(["--out", str(out), "--", "run", "--target", "gfx950", "--from", str(start),
                                 "--proposer", "tune", "--steps", "1", "--candidates", "2",
                                 "--runs-dir", str(tmp_path / "runs"), "--run-id", "t"])
    assert code == 0, capsys.readouterr().err
    result = json.loads(out.read_text())
    assert result["candidates"] == 2 and result["measured_candidates"] == 0
    assert result["candidates_per_gpu_hour"] is None and result["device"] is None  # no GPU: nothing measured
    assert result["seconds_per_candidate_by_phase"]["static"] > 0
    assert result["all_candidates_per_hour"] > 0 and 0 < result["loop_wall_s"] < result["wall_s"]


@pytest.mark.slow
def test_scaling_with_one_worker_writes_a_record_per_configuration(start, tmp_path, capsys):
    out = tmp_path / "scaling.json"
    code = loop_scaling.main(["--target", "gfx950", "--from", str(start), "--steps", "1", "--candidates", "2",
                              "--workers", "1,2", "--executors", "local", "--gpus", "0", "--runs-dir",
                              str(tmp_path / "runs"), "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    records = json.loads(out.read_text())["records"]
    one, two = records
    assert one["workers"] == 1 and one["candidates"] == 2 and one["candidates_per_hour"] > 0
    assert one["speedup_vs_1"] == 1.0 and one["decisions_vs_1"]["all_match"]
    assert one["decisions_vs_1"]["common_candidates"] == 2
    assert one["ledger"] == {**one["ledger"], "entries": 2, "duplicated_numbers": 0, "waiting_unjudged": 0,
                             "fsck_clean": True}
    assert two == {"executor": "local", "workers": 2, "skipped": "needs 2 GPUs, this host shows 0"}
    assert "| local | 1 |" in out.with_suffix(".md").read_text()
