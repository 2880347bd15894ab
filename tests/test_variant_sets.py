"""The sm90 variant sets and their GPU driver (benchmarks/knob_variants_gpu.py), and the fidelity script's reading
of what the driver writes (benchmarks/static_model_fidelity.py)."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_the_occupancy_set_has_at_least_twelve_variants_of_existing_stages():
    config = json.loads((ROOT / "benchmarks" / "sm90_occupancy_variants.json").read_text())
    variants = config["variants"]
    assert len(variants) >= 12 and all((ROOT / v["file"]).is_file() and v["mechanism"] for v in variants)
    assert len({(v["file"], json.dumps(v["knobs"], sort_keys=True)) for v in variants}) == len(variants)


def test_the_driver_keeps_going_and_the_fidelity_script_reads_its_files(tmp_path):
    gpu, fidelity = _load("knob_variants_gpu"), _load("static_model_fidelity")
    small = {"shape": [256, 256, 256], "tie_threshold": 0.03, "variants": [
        {"stage": "v03", "file": "kernels/sm90/bf16/v03_tma_ring.py", "knobs": {"NUM_STAGES": 2}, "mechanism": "ring"},
        {"stage": "v03", "file": "kernels/sm90/bf16/no_such_stage.py", "knobs": {}, "mechanism": "missing file"}]}
    path = tmp_path / "sm90_tiny_variants.json"
    path.write_text(json.dumps(small))
    assert gpu.main(["--out-dir", str(tmp_path / "out"), "--set", str(path), "--dry-run", "--commit", "abc"]) == 0
    out = tmp_path / "out" / "sm90_tiny_variants.jsonl"
    header, rows = fidelity.read_measured(out)
    assert header["set"] == "sm90_tiny_variants" and header["commit"] == "abc" and header["measured"] is False
    assert [r["role"] for r in rows] == ["variant", "variant", "default", "default"]
    assert rows[0]["status"] == "ok" and rows[1]["status"] != "ok"      # the missing file did not stop the run
    # measured figures as the GPU run would write them, scored against estimates keyed as the script keys them
    for r, tflops in zip(rows, (400.0, None, 500.0, None)):
        r.update(status="ok" if tflops else "load_error", tflops=tflops, correct=bool(tflops), device="NVIDIA H200")
    out.write_text("\n".join(json.dumps(x) for x in [header, *rows]) + "\n")
    jobs = fidelity.measured_jobs(out)
    estimates = {(p, s, fidelity._knob_key(k or {})): {"estimated_tflops": e} for (p, _, s, k), e in
                 zip(jobs, (380.0, 10.0, 520.0, 10.0))}
    (variants,) = [r for r in fidelity.measured_records(out, estimates) if r.get("kernels") is None]
    assert variants["set"] == "sm90_tiny_variants" and variants["n"] == 1 and variants["device"] == "NVIDIA H200"
    both = fidelity.measured_records(out, estimates)[1]
    assert both["n"] == 2 and both["pairwise_accuracy"] == 1.0 and both["median_abs_error"] == 0.045


def test_occupancy_set_2_is_held_out_from_set_1_and_the_fidelity_script_names_it_out_of_sample(tmp_path):
    first, second = (json.loads((ROOT / "benchmarks" / name).read_text())
                     for name in ("sm90_occupancy_variants.json", "sm90_occupancy_variants_2.json"))
    key = lambda v: (v["file"], json.dumps(v["knobs"], sort_keys=True))
    variants = second["variants"]
    assert len(variants) >= 12 and second["chosen_at_utc"] and second["shape"] != first["shape"]
    assert all((ROOT / v["file"]).is_file() and v["mechanism"] for v in variants)
    assert len({key(v) for v in variants}) == len(variants) and not {key(v) for v in variants} & {
        key(v) for v in first["variants"]}
    gpu, fidelity = _load("knob_variants_gpu"), _load("static_model_fidelity")
    assert gpu.SET_NAMES["sm90_occupancy_variants_2.json"] == "sm90_occupancy_variants_2"
    assert fidelity.RESULTS / "sm90_occupancy_variants_2_h200.jsonl" in fidelity.MEASURED_FILES
    # a measured file of set 2 as the H200 run writes it: scored, and labelled out of sample
    header = {"header": True, "set": "sm90_occupancy_variants_2", "target": "sm90", "device": "NVIDIA H200",
              "commit": "abc", "date": "2026-12-02", "tie_threshold": 0.03}
    rows = [{"stage": v["stage"], "file": v["file"], "knobs": v["knobs"], "role": "variant",
             "shape": second["shape"], "status": "ok", "correct": True, "tflops": 100.0 + 10 * i}
            for i, v in enumerate(variants[:3])]
    path = tmp_path / "sm90_occupancy_variants_2_h200.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in [header, *rows]) + "\n")
    estimates = {(p, s, fidelity._knob_key(k or {})): {"estimated_tflops": 50.0 + i} for i, (p, _, s, k) in
                 enumerate(fidelity.measured_jobs(path))}
    (record,) = fidelity.measured_records(path, estimates)
    assert record["set"] == "sm90_occupancy_variants_2" and record["n"] == 3 and record["spearman"] == 1.0
    assert record["sample"].startswith("out of sample")
    first_set = fidelity.SAMPLE["sm90_occupancy_variants"]
    earlier = fidelity.EARLIER_OUT_OF_SAMPLE[0]
    assert first_set.startswith("in-sample") and earlier["set"] == "sm90_occupancy_variants"
    assert "out of sample" in earlier["sample"]
