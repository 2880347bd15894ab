"""The sets benchmarks/fit_static_model.py fits and validates the sm90 memory constants on stay disjoint."""
from __future__ import annotations

import json

import pytest

from benchmarks import fit_static_model as fit


def test_variant_fitting_set_is_the_correct_variants_without_the_ladder_defaults():
    config, chosen = fit.fitting_variants()
    lines = [json.loads(line) for line in fit.VARIANT_RESULTS.read_text().splitlines() if line.strip()]
    measured = [r for r in lines if not r.get("header")]
    correct_variants = [r for r in measured if r["role"] == "variant" and r["status"] == "ok"]
    assert len(chosen) == len(correct_variants) >= 20
    assert all(r["role"] == "variant" and r["status"] == "ok" and r["tflops"] > 0 for r in chosen)
    assert len({r["label"] for r in chosen}) == len(chosen)
    # No variant is a ladder stage at its default knobs: each changes at least one knob.
    assert all(r["knobs_changed"] for r in chosen)
    assert tuple(config["shape"]) in fit.LADDER_SHAPES


def test_fit_on_rejects_an_unknown_set(capsys):
    with pytest.raises(SystemExit):
        fit.main(["--fit-on", "everything"])
    assert "invalid choice" in capsys.readouterr().err
