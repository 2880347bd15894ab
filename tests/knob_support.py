"""Every knob setting a reference stage offers (KNOB_CHOICES) must compile to a kernel that can launch.

The tune proposer and the loop sweep KNOB_CHOICES, so an invalid value there costs every run an evaluation and
can look like a kernel regression. The per-ladder test files (tests/test_knob_choices_*.py, one per ladder so
xdist spreads them) compile each single-knob variation of a stage's defaults through the evaluator's static
path and check:

* status ok (a value that does not compile is not a choice);
* shared memory / LDS within the target's per-block limit (a kernel over it compiles but cannot launch);
* no scratch traffic in the hot loop, unless the stage's docstring says that setting spills there
  (`DOCUMENTED_HOT_LOOP_SPILLS`);
* tile knobs keep to SHAPE_MULTIPLE: compiled at three times SHAPE_MULTIPLE, a shape the contract says is
  supported, the launch's whole-tile check must hold (a tile that does not divide a supported shape reads past
  the rows and fails the runtime correctness check, which a compile at the benchmark shape cannot see).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
from triton_release import RELEASE

from evaluator.contract import read_constant
from evaluator.ladder import KERNELS_DIR, stage_paths
from evaluator.targets import get_target

# stage (ladder/stem) -> (the knob setting that spills in the hot loop, or None for every setting; a phrase of
# the stage's docstring that says so)
DOCUMENTED_HOT_LOOP_SPILLS: dict[str, tuple[dict | None, str]] = {
    "gfx950/fp16/v06_loop_unroll": (None, "the spills now reach the hot loop"),
    "gfx942/fp16/v00_naive": ({"num_warps": 4}, "address arithmetic spills"),
    "gfx942/fp16/v01_lds_pipelined": ({"BLOCK_K": 64}, "spills, also in the hot loop"),
    "sm90/bf16/v00_mma_v2": ({"BLOCK_K": 64}, "spills, also inside the K loop"),
}

TILE_KNOBS = ("BLOCK_M", "BLOCK_N", "BLOCK_K")


def variations(ladder: str) -> list:
    """pytest params (stage path, knob overrides) for the defaults and every single-knob variation of each stage
    of kernels/<ladder>; read from the source, nothing imported."""
    params = []
    for path in stage_paths(KERNELS_DIR / ladder):
        knobs = read_constant(path, "KNOBS", {}) or {}
        choices = read_constant(path, "KNOB_CHOICES", {}) or {}
        params.append(pytest.param(str(path), {}, id=f"{path.stem}:defaults"))
        for name, values in choices.items():
            for value in values:
                if value != knobs.get(name):
                    params.append(pytest.param(str(path), {name: value}, id=f"{path.stem}:{name}={value}"))
    return params


def tile_variations(ladder: str) -> list:
    """The `variations` that change no knob or a tile size: the ones whose whole-tile shape rule can differ."""
    return [p for p in variations(ladder) if not p.values[1] or set(p.values[1]) <= set(TILE_KNOBS)]


def _stage_key(path: str) -> str:
    return Path(path).relative_to(KERNELS_DIR).with_suffix("").as_posix()


def _documented_spill(path: str, overrides: dict) -> str | None:
    """The docstring phrase that documents hot-loop spills for this setting, if any."""
    setting, phrase = DOCUMENTED_HOT_LOOP_SPILLS.get(_stage_key(path), ({}, None))
    if phrase is None or (setting is not None and not setting.items() <= overrides.items()):
        return None
    return phrase


DOCUMENTED_RELEASE = (3, 6)   # the release whose compiler output the stage docstrings quote


def check_variation(static_eval, path: str, overrides: dict) -> None:
    """Compile one setting at the benchmark shape and hold it to the target's limits."""
    record = static_eval(path, None, None, tuple(sorted(overrides.items())))
    assert record["status"] == "ok", f"{overrides or 'defaults'}: {record['status']}: {record.get('message')}"
    static = record["static"]
    target = get_target(record["target"])
    assert static["shared_bytes"] <= target.shared_bytes_per_block, (
        f"{overrides or 'defaults'}: {static['shared_bytes']} B of shared memory, over the "
        f"{target.shared_bytes_per_block} B a {target.name} block may use")
    if static["hot_loop_spills"] and RELEASE != DOCUMENTED_RELEASE:
        return  # the docstrings quote Triton 3.6.0's compiler output; other releases spill elsewhere (triton_versions.md)
    if static["hot_loop_spills"]:
        phrase = _documented_spill(path, overrides)
        assert phrase, (f"{overrides or 'defaults'}: {static['hot_loop_spills']} scratch accesses in the hot loop of "
                        "a stage whose docstring promises none")
        docstring = ast.get_docstring(ast.parse(Path(path).read_text())) or ""
        assert phrase in " ".join(docstring.split()), f"the docstring no longer says {phrase!r}"


def check_tiles_fit_shape_multiple(static_eval, path: str, overrides: dict) -> None:
    """Compile one setting at 3 x SHAPE_MULTIPLE (odd, so a tile twice the multiple does not divide it)."""
    multiple = read_constant(path, "SHAPE_MULTIPLE", (1, 1, 1))
    shape = tuple(3 * m for m in multiple)
    record = static_eval(path, None, shape, tuple(sorted(overrides.items())))
    assert record["status"] == "ok", (f"{overrides or 'defaults'} at {shape} (SHAPE_MULTIPLE {multiple} says it is "
                                      f"supported): {record['status']}: {record.get('message')}")
