"""The gfx950 FP16 reference ladder: ten stages, v00_naive to v09_beyond_hotloop, one technique each."""
