"""benchmarks/aa_check.py on the CPU: its summary of repeats and its table (the GPU run itself is on the H200)."""
from __future__ import annotations

from benchmarks.aa_check import markdown, summarize


def _record(shape, timing, speedup, low, high, **extra):
    return {"shape": list(shape), "timing": timing, "speedup": speedup, "ci_low": low, "ci_high": high,
            "launch_bound": False, "error": None, "message": None, **extra}


def test_summary_counts_the_intervals_that_cover_one_per_shape_and_timing():
    records = [_record((16, 4096, 14336), "eager", 0.99, 0.98, 0.995),
               _record((16, 4096, 14336), "eager", 1.0, 0.99, 1.01),
               _record((16, 4096, 14336), "graph", 1.001, 0.999, 1.003),
               _record((4096, 4096, 4096), "eager", 1.0, 0.998, 1.002, launch_bound=True),
               _record((4096, 4096, 4096), "eager", None, None, None, error="timeout", message="killed")]
    rows = {(tuple(r["shape"]), r["timing"]): r for r in summarize(records)}
    eager = rows[((16, 4096, 14336), "eager")]
    assert (eager["repeats"], eager["covers_one"], eager["coverage"]) == (2, 1, 0.5)
    assert eager["median_speedup"] == 0.995 and eager["min_speedup"] == 0.99
    large = rows[((4096, 4096, 4096), "eager")]
    assert large["repeats"] == 1 and large["launch_bound"] == 1  # the failed repeat is not a repeat
    report = {"kernel": "k.py", "device": "X", "method": "A/B", "records": records, "summary": summarize(records),
              "meta": {"command": "c", "date_utc": "d", "git": {"commit": "abc", "dirty": False, "source": "git"}}}
    text = markdown(report)
    assert "| 16x4096x14336 | eager | 2 | 1 of 2 (50%) | 0.9950 |" in text
    assert "1 repeat(s) failed: timeout: killed" in text
