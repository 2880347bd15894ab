"""The load-dependent clock (evaluator.targets.clock) and what it bounds: no estimate above the peak at its clock."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluator.clock import ClockPair, fit_clock, leave_one_out
from evaluator.targets import all_targets, get_target
from evaluator.targets.gfx950.clocks import PEAK_TFLOPS_PER_GHZ as GFX950_PEAK_PER_GHZ
from evaluator.targets.gfx950.clocks import pairs as gfx950_pairs
from evaluator.targets.sm90.clocks import MEASURED

ROOT = Path(__file__).resolve().parents[1]


def test_a_fit_recovers_a_line_and_reports_its_leave_one_out_error():
    line = [ClockPair(f"p{i}", u, 2.2 - 0.8 * u) for i, u in enumerate((0.2, 0.4, 0.6, 0.8, 1.0))]
    model = fit_clock(line, 2.4, "synthetic")
    assert model.intercept_ghz == pytest.approx(2.2) and model.slope_ghz == pytest.approx(-0.8)
    assert model.leave_one_out_error == pytest.approx(0.0, abs=1e-9) and model.validated
    assert model.at(2.0) == pytest.approx(1.4) and model.at(-1) == pytest.approx(2.2)   # clamped to [0, 1]
    noisy = line[:4] + [ClockPair("p4", 1.0, 1.6)]
    assert fit_clock(noisy, 2.4, "synthetic").leave_one_out_error > 0
    assert leave_one_out(noisy, 4, 2.4).at(1.0) == pytest.approx(1.4)


def test_a_busier_loop_is_never_estimated_slower():
    for target in all_targets():
        clock = target.clock
        values = [u / 100 * clock.at(u / 100) for u in range(101)]
        assert values == sorted(values), target.name


def test_no_gfx950_fp16_kernel_can_be_estimated_above_the_seeds_best_scaled_to_a_busy_loop():
    clock = get_target("gfx950").clock
    # 1489 TFLOP/s at 98.7% MFMA-busy, scaled to a fully busy loop, plus 3%
    assert max(u / 100 * clock.at(u / 100) for u in range(101)) * GFX950_PEAK_PER_GHZ < 1489 / 0.987 * 1.03


def test_gfx950_clock_fit_is_the_seeds_ten_pairs_and_its_error_is_reported():
    clock = get_target("gfx950").clock
    assert clock.fitted_on == 10 and clock.validated and "seed" in clock.source
    assert clock.leave_one_out_error is not None and clock.leave_one_out_error < 0.1
    implied = {p.label: p.clock_ghz for p in gfx950_pairs()}
    assert implied["v00"] > 1.9 and implied["v09"] < 1.45       # the seed's own pairs: slower when busier


def test_sm90_clock_pairs_are_the_runtime_records_readings():
    rows = [json.loads(line) for line in (ROOT / "benchmarks/results/sm90_knob_variants_h200.jsonl").read_text().splitlines()]
    read = [(round(r["tflops"], 1), r["clocks_mhz"]["after_timing"]["sm"]) for r in rows
            if not r.get("header") and r.get("status") == "ok" and (r.get("clocks_mhz") or {}).get("after_timing")]
    assert [(t, m) for _, t, m in MEASURED] == read
    clock = get_target("sm90").clock
    assert 1.4 < clock.at(1.0) < clock.at(0.2) <= 1.98


@pytest.mark.parametrize("name", ["gfx942", "sm100"])
def test_compile_only_targets_say_their_clock_is_the_datasheets(name):
    clock = get_target(name).clock
    assert clock.source == "datasheet clock, not validated" and not clock.validated
    assert clock.at(0.0) == clock.at(1.0) == get_target(name).clock_ghz


def test_eight_wave_variants_of_the_gfx950_ladder_stay_below_the_busy_loop_bound():
    from evaluator.api import evaluate_static

    for name in ("v00_naive", "v09_beyond_hotloop"):
        path = ROOT / "kernels" / "gfx950" / "fp16" / f"{name}.py"
        four, eight = evaluate_static(str(path), target="gfx950"), evaluate_static(str(path), target="gfx950", knobs={"num_warps": 8})
        tp = eight["static"]["throughput"]
        assert tp["streams_per_pipe"] == 2 and eight["static"]["estimated_tflops"] < 1489 / 0.987 * 1.03
        assert tp["share_of_datasheet_peak"] == pytest.approx(eight["static"]["estimated_tflops"] / 2516.6, abs=2e-3)
        assert eight["static"]["estimated_tflops"] < 1.6 * four["static"]["estimated_tflops"]
