"""Raises while being imported."""
TARGET = "gfx950"
DTYPE = "float16"
SHAPES = [(256, 256, 64)]

raise RuntimeError("configuration table missing")
