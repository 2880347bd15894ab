"""The installed Triton release, for the tests whose compiler-output expectations differ between releases
(benchmarks/results/triton_versions.md has the figures of each)."""
from __future__ import annotations

import triton

RELEASE = tuple(int(part) for part in triton.__version__.split(".")[:2])  # (3, 6) for 3.6.0
