"""Broken: launch loops forever on the host. Passes the policy; must end as a timeout, not a hung caller."""

TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(1024, 1024, 1024)]
KNOBS = {}


def launch(a, b, c):
    spins = 0
    while spins >= 0:
        spins += 1
