"""The ranking checks `nearpeak ladder` prints: the static estimate against published figures over the target's
published set, and over its main ladder alone when the set also holds other folders' kernels."""
from __future__ import annotations

from evaluator.ladder import correlations, render

FP16 = [f"v{i:02d}" for i in range(10)]


def _row(stage: str, folder: str, estimate: float, published: float) -> dict:
    return {"stage": stage, "file": f"kernels/gfx950/{folder}/{stage}_x.py", "technique": "", "status": "ok",
            "message": None, "estimated_efficiency": estimate, "published_mfma_efficiency": published,
            "estimated_tflops": estimate * 1000, "published_tflops": published * 1000}


def test_gfx950_ladder_reports_the_full_published_set_and_the_fp16_ladder_alone():
    # fp16 estimates in the published order (rho 1 alone); the low-precision kernels estimated lowest though
    # published highest, which only the twelve-kernel figure sees.
    rows = [_row(stage, "fp16", 0.1 + 0.05 * i, 0.2 + 0.07 * i) for i, stage in enumerate(FP16)]
    rows += [_row("bf8", "bf8", 0.01, 0.997), _row("mxfp4", "mxfp4", 0.02, 0.99)]
    found = {(c["n"], c["between"]): c for c in correlations("gfx950", rows)}
    twelve = found[(12, "static estimated_efficiency and published_mfma_efficiency")]
    ten = found[(10, "static estimated_efficiency and published_mfma_efficiency")]
    assert ten["stages"] == FP16 and ten["spearman_rho"] == 1.0
    assert twelve["spearman_rho"] < 0.5
    assert (10, "static estimated_tflops and published_tflops") in found
    text = render("gfx950", rows, list(found.values()))
    assert "n=10 (v00, v01, v02, v03, v04, v05, v06, v07, v08, v09): 1.0" in text


def test_a_ladder_of_one_folder_reports_it_once():
    rows = [_row(stage, "fp16", 0.1 + 0.05 * i, 0.2 + 0.07 * i) for i, stage in enumerate(FP16)]
    ns = [c["n"] for c in correlations("gfx950", rows) if "published_mfma" in c["between"]]
    assert ns == [10]
