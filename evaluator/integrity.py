"""Digest of the evaluator's own source, taken by the parent before and after each sandboxed candidate.

A candidate that rewrites the code that scores it (a tolerance, a timer, a comparison) must not be scored
by the rewritten code, nor leave it behind for the next candidate. The runtime stage also hashes these files
from inside its process (`evaluator.runtime.defenses.Integrity`); this check runs in the parent, after the
child and everything it forked are dead, so it also sees writes made at teardown or by a stray grandchild.
It needs no torch import, so the parent stays light.
"""
from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

EVALUATOR_ROOT = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Snapshot:
    """sha256 of every `*.py` file under `root`, keyed by path relative to it."""

    root: str
    files: Mapping[str, str]

    def changes(self, later: Snapshot) -> tuple[str, ...]:
        """Files added, removed or modified between this snapshot and `later`, sorted."""
        names = set(self.files) | set(later.files)
        return tuple(sorted(n for n in names if self.files.get(n) != later.files.get(n)))


def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:  # unreadable after a candidate ran counts as changed, not as a crash of ours
        return f"unreadable: {type(exc).__name__}"


def snapshot(root: str | Path | None = None) -> Snapshot:
    """Hash the evaluator package (or another tree, for tests) as it is now."""
    base = Path(root).resolve() if root else EVALUATOR_ROOT
    files = {str(p.relative_to(base)): _digest(p) for p in sorted(base.rglob("*.py"))
             if "__pycache__" not in p.parts}
    return Snapshot(root=str(base), files=MappingProxyType(files))
