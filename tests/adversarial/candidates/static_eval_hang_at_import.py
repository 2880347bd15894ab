"""Broken: hangs at import. Through the public `evaluator.api.evaluate(..., run=False)` (what `nearpeak eval
FILE` calls), which once imported the file in the caller's own process with no time limit; now the static
stage runs in a sandbox and the wall-clock limit ends it (`timeout`)."""

TARGET = "gfx950"
DTYPE = "float16"
OUT_DTYPE = "float16"
SHAPES = [(1024, 1024, 1024)]
KNOBS = {}

while True:
    pass


def launch(a, b, c):
    c.zero_()
