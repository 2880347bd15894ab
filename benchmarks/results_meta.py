"""What every benchmarks/results file records about how it was made: command, date, git commit, dirty tree.

On a machine that got a copy of the tree (the lent GPU), the caller passes the commit in `NEARPEAK_GIT_COMMIT`
and `NEARPEAK_GIT_DIRTY` (1/0), read where it was copied from.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def git_state() -> dict:
    """{"commit", "dirty", "source"}: from the environment when the caller set it, else from git in the tree,
    else unknown (None).

    The environment wins because a copied tree's `.git` can be stale: the lent GPU once reported an older HEAD
    (and "dirty") for a tree copied from a newer commit. Only a repository whose top level is this tree counts:
    a copy inside another checkout (as on the lent GPU, under .stage/) would otherwise report that checkout's.
    """
    env_commit = os.environ.get("NEARPEAK_GIT_COMMIT")
    if env_commit:
        return {"commit": env_commit, "dirty": os.environ.get("NEARPEAK_GIT_DIRTY") == "1",
                "source": "NEARPEAK_GIT_COMMIT (set by the caller that copied the tree)"}
    top = _git("rev-parse", "--show-toplevel")
    commit = _git("rev-parse", "HEAD") if top and Path(top).resolve() == ROOT else None
    if commit:
        status = _git("status", "--porcelain", "--untracked-files=no")
        return {"commit": commit, "dirty": bool(status), "source": "git"}
    return {"commit": None, "dirty": None, "source": "unknown: no git and no NEARPEAK_GIT_COMMIT"}


def run_metadata(argv: list[str] | None = None) -> dict:
    """Command line, UTC date and git state of this run."""
    return {"command": shlex.join([Path(sys.executable).name, *(sys.argv if argv is None else argv)]),
            "date_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"), "git": git_state()}


def markdown_lines(meta: dict) -> list[str]:
    """The same, as bullet lines for a results .md file."""
    git = meta["git"]
    dirty = {True: " (dirty tree)", False: " (clean tree)", None: ""}[git["dirty"]]
    return [f"- date (UTC): {meta['date_utc']}", f"- command: `{meta['command']}`",
            f"- git commit: {git['commit'] or 'unknown'}{dirty}"]
