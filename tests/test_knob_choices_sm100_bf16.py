"""Every KNOB_CHOICES setting of the kernels/sm100/bf16 stages compiles within the target's limits (tests/knob_support.py)."""
from __future__ import annotations

import pytest
from knob_support import check_tiles_fit_shape_multiple, check_variation, tile_variations, variations

pytestmark = pytest.mark.slow  # compiles every single-knob variation of every stage of the ladder

LADDER = "sm100/bf16"


@pytest.mark.parametrize("path, overrides", variations(LADDER))
def test_knob_setting_compiles_within_limits(static_eval, path, overrides):
    check_variation(static_eval, path, overrides)


@pytest.mark.parametrize("path, overrides", tile_variations(LADDER))
def test_tile_setting_divides_every_supported_shape(static_eval, path, overrides):
    check_tiles_fit_shape_multiple(static_eval, path, overrides)
