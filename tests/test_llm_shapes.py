"""benchmarks/llm_shapes.py on the CPU: the shape list, which stages fit, record assembly, the goals and the table."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import llm_shapes as ls


def test_layer_shapes_follow_the_model_configs():
    by_name = {m.name: m for m in ls.MODELS}
    assert ls.layers(by_name["llama-3-8b"]) == {"qkv_proj": (6144, 4096), "o_proj": (4096, 4096),
                                                "gate_up_proj": (28672, 4096), "down_proj": (4096, 14336)}
    assert ls.layers(by_name["llama-3-70b"])["qkv_proj"] == (10240, 8192)
    assert ls.layers(by_name["qwen2.5-7b"])["qkv_proj"] == (4608, 3584)
    names = ls.layer_names()
    assert names[(4096, 14336)] == ("llama-3-8b/down_proj", "mistral-7b/down_proj")  # one shape, two models


def test_full_list_spans_decode_to_prefill_and_every_v02_plus_stage_fits():
    shapes = ls.full_shapes()
    assert min(s.M for s in shapes) == 1 and max(s.M for s in shapes) >= 8192
    assert len({(s.N, s.K) for s in shapes}) == 14
    for stage in ls.sm90_stages():
        if stage.name not in ("v00", "v01"):
            assert all(stage.fits(s) for s in shapes), stage.name
    v00 = next(s for s in ls.sm90_stages() if s.name == "v00")
    assert not v00.fits(ls.Shape(16, 4096, 14336, ())) and v00.fits(ls.Shape(256, 4096, 14336, ()))


def test_quick_subset_is_v10_and_v11_of_both_dtypes_at_twelve_shapes():
    shapes = ls.quick_shapes()
    assert len(shapes) == 12 and sum(s.M <= ls.SMALL_M for s in shapes) == 9
    assert sum(s.M >= ls.LARGE_M for s in shapes) == 3 and (16, 4096, 14336) in [s.mnk for s in shapes]
    ns = type("A", (), {"variant": [], "quick": True, "dtype": None})()
    picked, stages = ls.select(ns)
    assert sorted(s.name for s in stages) == sorted(ls.QUICK_STAGES)
    todo = ls.plan(picked, stages)
    assert len(todo) == 48
    # shape by shape, so a run cut short has both stages of every shape it reached
    assert [sh.mnk for sh, _ in todo[:4]] == [shapes[0].mnk] * 4
    assert [s.name for _, s in todo[:4]] != [s.name for _, s in todo[4:8]]  # the order flips per shape


def test_variant_parsing():
    stages = ls.sm90_stages()
    v = ls.parse_variant("v11:SMALL_SPLIT_K=8,SMALL_BLOCK_N=64", stages)
    assert v.label == "v11:SMALL_BLOCK_N=64,SMALL_SPLIT_K=8" and v.path.endswith("v11_small_m.py")
    with pytest.raises(ValueError, match="unknown stage"):
        ls.parse_variant("v99", stages)
    with pytest.raises(ValueError, match="NAME=INTEGER"):
        ls.parse_variant("v11:SMALL_SPLIT_K=x", stages)


def evaluation(ratio: float, graph: float, status: str = "ok", correct: bool = True) -> dict:
    """The parts of an evaluator.api.evaluate record that make_record reads (docs/eval-schema.md)."""
    return {"status": "ok", "message": None, "runtime": {
        "status": status, "correct": correct, "device": "NVIDIA H200", "ratio_vs_vendor": ratio,
        "ratio_vs_vendor_graph": graph, "host_us_per_call": 9.5, "vendor_host_us_per_call": 18.0,
        "median_ms": 0.04, "vendor_median_ms": 0.04 * ratio, "graph_median_ms": 0.03,
        "vendor_graph_median_ms": 0.03 * graph, "tflops": 100.0, "vendor_tflops": 100.0 / ratio,
        "vendor": "torch.matmul", "launch_bound": False, "graph_note": None, "seed": 5, "verdict": "correct"}}


def stage(name: str) -> ls.Stage:
    return next(s for s in ls.sm90_stages() if s.name == name)


@pytest.fixture
def records() -> list[dict]:
    small, large = ls.Shape(16, 4096, 14336, ("llama-3-8b/down_proj",)), ls.Shape(4096, 6144, 4096, ("x/qkv",))
    made = []
    for shape, st, ev in [(small, "v10", evaluation(1.2, 0.55)), (small, "v11", evaluation(1.5, 1.25)),
                          (large, "v10", evaluation(0.99, 0.98)), (large, "v11", evaluation(0.98, 0.97)),
                          (small, "v10-fp8", evaluation(1.1, 0.5)),
                          (small, "v11-fp8", evaluation(1.0, 0.9, status="wrong_result", correct=False))]:
        made.append(ls.make_record(shape, stage(st), ev, "abc123", "2026-12-25T00:00:00+00:00", 7.0))
    return made


def test_record_carries_the_issue_fields(records):
    rec = records[1]
    for key in ("stage", "dtype", "M", "N", "K", "correct", "ratio_vs_vendor", "ratio_vs_vendor_graph",
                "host_us_per_call", "device", "commit", "date"):
        assert key in rec
    assert (rec["stage"], rec["dtype"], rec["M"], rec["correct"], rec["device"]) == ("v11", "bf16", 16, True,
                                                                                      "NVIDIA H200")
    assert records[-1]["status"] == "wrong_result" and records[-1]["correct"] is False
    failed = ls.make_record(ls.Shape(1, 8, 8, ()), stage("v11"), {"status": "no_device", "message": "no GPU"},
                            None, "d", 1.0)
    assert failed["status"] == "no_device" and failed["ratio_vs_vendor"] is None and not failed["correct"]


def test_goals_from_the_fixture(records):
    bf16, fp8 = ls.goals(records)
    assert bf16["small_m_shapes"] == 1 and bf16["min_graph_ratio_small_m"] == 1.25
    assert bf16["min_graph_vs_v10_large_m"] == pytest.approx(0.97 / 0.98)
    assert bf16["min_eager_vs_v10"] == pytest.approx(0.98 / 0.99)
    assert fp8["small_m_shapes"] == 0 and fp8["not_correct"] == 1 and fp8["geomean_graph_ratio_small_m"] is None


def test_markdown_table_and_incremental_files(records, tmp_path):
    meta = {"date_utc": "2026-12-25T00:00:00+00:00", "command": "python benchmarks/llm_shapes.py --quick",
            "git": {"commit": "abc123", "dirty": False, "source": "git"}, "deadline_s": 330}
    ls.write(tmp_path, meta, records[:2], [])
    first = json.loads((tmp_path / "llm_shapes.json").read_text())
    assert len(first["records"]) == 2
    ls.write(tmp_path, meta, records, [{"stage": "v10", "M": 1, "N": 8, "K": 8}])
    doc = json.loads((tmp_path / "llm_shapes.json").read_text())
    assert len(doc["records"]) == 6 and doc["not_run"] and doc["goals"][0]["stage"] == "v11"
    text = (tmp_path / "llm_shapes.md").read_text()
    assert "measured on NVIDIA H200" in text and "Cut short: 1 planned evaluations" in text
    # TB/s: (16 + 4096) x 14336 x 2 + 16 x 4096 x 2 bytes over 0.03 ms (the stage) and 0.0375 ms (the vendor)
    assert ("| bf16 | 16x4096x14336 | llama-3-8b/down_proj | v11 | yes | 1.500 | 1.250 | 3.93 | 3.15 | 9.5 | 18.0 "
            "| abc123 |") in text
    assert "- bf16: 1.525; 1.525" in text       # HBM ceiling: 4.8 / 3.147 TB/s
    assert "| fp8 | 16x4096x14336 | llama-3-8b/down_proj | v11-fp8 | no: wrong_result |" in text
    assert "| bf16 | 1 | 1.250 (met) | 1.250 (met) | 0.990 (missed by 1.0%) | 0.990 (missed by 1.0%) | 0 |" in text
    assert "| fp8 | 0 | - (-) | - (-) |" in text


def test_merge_keeps_the_later_measurement_and_names_every_source(records, tmp_path):
    meta = {"date_utc": "2026-12-25T00:00:00+00:00", "command": "first", "git": {"commit": "abc123"}}
    ls.write(tmp_path / "a", meta, records, [])
    newer = dict(records[1], ratio_vs_vendor_graph=1.5, commit="def456")
    ls.write(tmp_path / "b", {**meta, "command": "second", "git": {"commit": "def456"}}, [newer], [])
    assert ls.main(["--merge", str(tmp_path / "a" / "llm_shapes.json"), str(tmp_path / "b" / "llm_shapes.json"),
                    "--out", str(tmp_path / "m")]) == 0
    doc = json.loads((tmp_path / "m" / "llm_shapes.json").read_text())
    assert len(doc["records"]) == len(records)
    v11 = [r for r in doc["records"] if r["label"] == "v11" and r["M"] == 16]
    assert [r["ratio_vs_vendor_graph"] for r in v11] == [1.5] and doc["goals"][0]["min_graph_ratio_small_m"] == 1.5
    assert [s["command"] for s in doc["sources"]] == ["first", "second"]
    text = (tmp_path / "m" / "llm_shapes.md").read_text()
    assert "Rows come from 2 commits (abc123, def456)" in text
    assert ls.main(["--merge", str(tmp_path / "missing.json")]) == 2


def test_dry_run_and_no_device(capsys):
    assert ls.main(["--quick", "--dry-run", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 48 and {r["stage"] for r in rows} == set(ls.QUICK_STAGES)
    assert ls.main(["--stages", "v11", "--m", "16", "--models", "llama-3-8b", "--dry-run"]) == 0
    assert "4 evaluations" in capsys.readouterr().out
    assert ls.main(["--variant", "v12:X=1", "--dry-run"]) == 2
    import torch

    if not torch.cuda.is_available():
        assert ls.main(["--quick"]) == 3  # NoDeviceError's exit code, before anything compiles
        assert "no GPU" in capsys.readouterr().err
