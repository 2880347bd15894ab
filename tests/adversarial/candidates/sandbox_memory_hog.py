"""Broken: asks for a terabyte at import. The static stage's address-space limit turns it into an error."""

TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(1024, 1024, 1024)]
KNOBS = {}

_BALLAST = bytearray(1 << 40)


def launch(a, b, c):
    c.zero_()
