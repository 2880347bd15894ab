"""The registry of GPU targets: one folder per target under evaluator/targets/, each exporting `TARGET`.

Adding a target is adding its folder and one line to `_FOLDERS`; nothing else in nearpeak names a target.
"""
from __future__ import annotations

from importlib import import_module

from ..errors import UsageError
from .base import Ladder, SmiReading, Target, Toolchain

__all__ = ["DEFAULT_TARGET", "Ladder", "SmiReading", "Target", "Toolchain", "UnknownTargetError", "all_targets", "get_target", "known_targets",
           "target_for_device"]

_FOLDERS = (
    "gfx942",
    "gfx950",
    "sm100",
    "sm90",
)


# What a bare `nearpeak run` starts from: the seed's ladder, which needs neither a GPU nor an API key.
DEFAULT_TARGET = "gfx950"


class UnknownTargetError(UsageError, ValueError):
    """A target name nearpeak has no folder for (a usage error; a ValueError for older callers)."""


def known_targets() -> tuple[str, ...]:
    """Names of every registered target, sorted (the CLI's `--target` choices)."""
    return tuple(sorted(_FOLDERS))


def get_target(name: str) -> Target:
    """The registered target called `name`; UnknownTargetError listing the known ones otherwise."""
    if name not in _FOLDERS:
        raise UnknownTargetError(f"unknown target {name!r}; known targets: {', '.join(known_targets())}")
    return import_module(f"{__name__}.{name}").TARGET


def all_targets() -> list[Target]:
    return [get_target(name) for name in known_targets()]


def target_for_device(backend: str, arch: str) -> Target | None:
    """The target of a GPU PyTorch reports as `backend` ("cuda"/"hip") and `arch` ("9.0", "gfx950"), if any."""
    return next((t for t in all_targets() if t.toolchain.matches_device(t, backend, arch)), None)
