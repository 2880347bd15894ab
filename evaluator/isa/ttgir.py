"""Read Triton's TTGIR (target-neutral): which shared-memory encodings a kernel allocates."""
from __future__ import annotations

import re


def shared_layout_kinds(ttgir: str) -> list[str]:
    """Shared-memory encodings of explicit allocations in the TTGIR (padded, swizzled, nvmma, plain)."""
    kinds = []
    for enc in re.findall(r"#ttg\.(padded_shared|swizzled_shared|nvmma_shared)<\{?([^>]*)>", ttgir):
        name, body = enc
        if name == "swizzled_shared" and re.search(r"maxPhase = 1\b", body):
            name = "unswizzled_shared"
        kinds.append(name)
    return sorted(set(kinds))
