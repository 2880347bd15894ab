"""How `nearpeak ladder`'s table reads: text columns left-aligned and cut at a word with an ellipsis, a note
beside an estimate far from its published figure (with the cause when the record shows one), units and a
legend for the register columns. Rows are written here with the fields ladder_records gives them."""
from __future__ import annotations

import pytest

from evaluator.ladder import FAR_FROM_PUBLISHED, TECHNIQUE_WIDTH, estimate_note, render
from evaluator.report import clip, format_record, table

LONG = "loop unrolled x2: constant buffer offsets fold into the loads, and the scheduler interleaves more"


def _row(stage: str, technique: str, estimate: float, published: float, loop_spills: int = 0) -> dict:
    return {"stage": stage, "file": f"kernels/gfx950/fp16/{stage}_x.py", "technique": technique, "status": "ok",
            "message": None, "arch_vgprs": 256, "agprs": 256, "sgprs": 61, "spills": 203,
            "hot_loop_spills": loop_spills, "lds_bytes": 135104, "occupancy": 1, "matrix_per_k_iteration": 256,
            "estimated_efficiency": 0.32, "estimated_tflops": estimate, "published_tflops": published,
            "published_mfma_efficiency": 0.866}


def _lines(text: str, stage: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(stage + " "))


def test_the_technique_column_is_left_aligned_and_cut_at_a_word_with_an_ellipsis():
    text = render("gfx950", [_row("v06", LONG, 778.0, 1167.0), _row("v07", "slice N", 1678.0, 1423.0)], [])
    header = text.splitlines()[0]
    column = header.index("technique")
    assert header.split()[:2] == ["stage", "technique"]
    v06, v07 = _lines(text, "v06"), _lines(text, "v07")
    assert v07[column:].startswith("slice N ")        # left-aligned: starts under its header
    cut = v06[column:].split("  ")[0]
    assert cut.endswith("…") and len(cut) <= TECHNIQUE_WIDTH and LONG.startswith(cut[:-1])
    assert LONG[len(cut) - 1] == " "                  # cut between words, not mid-word


def test_an_estimate_far_from_its_published_figure_gets_a_note_naming_visible_hot_loop_spills():
    rows = [_row("v06", LONG, 778.0, 1167.0, loop_spills=27), _row("v07", "slice N", 1500.0, 1423.0),
            _row("bf8", "fp8", 4940.0, 3257.0)]
    text = render("gfx950", rows, [])
    assert "note" in text.splitlines()[0]
    assert _lines(text, "v06").endswith("est. 33% below pub; 27 hot-loop spills in this compile, charged by the model")
    assert _lines(text, "v07").endswith("1423         86.6%")   # within reach: no note
    assert _lines(text, "bf8").endswith("est. 52% above pub")  # far, with no cause the record shows
    assert estimate_note(_row("x", "", 1000.0 * (1 - FAR_FROM_PUBLISHED), 1000.0, loop_spills=3)) == ""


def test_ladder_columns_carry_units_one_number_format_and_a_register_legend():
    text = render("gfx950", [_row("v06", LONG, 778.4, 1167.0)], [])
    header = text.splitlines()[0]
    assert "LDS KiB" in header and "est. TF/s" in header and "pub TF/s" in header and "TFLOPS" not in header
    assert " 778 " in _lines(text, "v06") and " 1167 " in _lines(text, "v06")   # TF/s columns alike: 0 decimals
    assert "a wave allocates VGPR (rounded up to 4 when AGPRs are used) + AGPR" in text
    sm90 = render("sm90", [{**_row("v09", "final tuning", 789.0, 0.0), "published_tflops": None,
                            "registers": 168, "shared_bytes": 229580}], [])
    assert "meas. TF/s" in sm90.splitlines()[0] and "regs = registers per thread" in sm90
    assert "(empty without --run)" in sm90


def test_eval_explains_total_vgprs_beside_arch_vgprs_and_agprs():
    record = {"status": "ok", "file": "k.py", "target": "gfx950", "shape": [4096, 4096, 8192],
              "static": {"arch_vgprs": 167, "agprs": 256, "total_vgprs": 424}}
    text = format_record(record)
    assert "total VGPRs" in text
    assert "424 (what a wave allocates: arch VGPRs, rounded up to 4 when AGPRs follow, + AGPRs)" in text


@pytest.mark.parametrize("text, width, expected", [
    ("short", 10, "short"),
    ("buffer loads: scalar base + 32-bit offsets", 20, "buffer loads…"),   # no dangling colon
    ("onewordthatislong", 8, "oneword…"),
])
def test_clip_cuts_at_a_word_boundary(text, width, expected):
    assert clip(text, width) == expected and len(clip(text, width)) <= width


def test_table_aligns_the_named_columns_left_and_numbers_right():
    lines = table([["a", "xy", 5], ["bb", "z", 123]], ["name", "text", "n"], left=(0, 1)).splitlines()
    assert lines[2] == "a     xy      5" and lines[3] == "bb    z     123"
