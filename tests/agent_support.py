"""Shared helpers for the agent tests: running `nearpeak` in-process and reading a run's ledger with git."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from agent.cli import main
from agent.ledger import Ledger

REPO = Path(__file__).resolve().parents[1]
LADDER = REPO / "kernels" / "gfx950" / "fp16"
V00 = LADDER / "v00_naive.py"
V02 = LADDER / "v02_async_copy.py"
# The first stage whose static gain over v00 (1.36x estimated) clears the static judge's error bar on gfx950
# (about 1.29x, docs/static-model.md): what the loop tests feed when a step must be accepted.
V03 = LADDER / "v03_lds.py"


def need(path: Path) -> Path:
    if not path.is_file():
        pytest.skip(f"{path.relative_to(REPO)} is not there yet")
    return path


def nearpeak(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def git(run: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(run), *args], check=True, capture_output=True, text=True).stdout


def refs(run: Path) -> dict[str, str]:
    """refname -> commit, for main and every attempt, population and retired ref."""
    out = git(run, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads", "refs/attempts",
              "refs/population", "refs/retired")
    return dict(line.split() for line in out.splitlines())


def trailers_at(run: Path, ref: str) -> dict[str, str]:
    ledger = Ledger(run)
    sha = ledger.resolve(ref)
    return next(e.trailers for e in ledger.entries() if e.sha == sha)


def file_at(run: Path, ref: str, name: str) -> str:
    return git(run, "show", f"{ref}:{name}")


def json_at(run: Path, ref: str, name: str) -> dict:
    return json.loads(file_at(run, ref, name))


def knobs_line(source: str) -> str:
    return re.search(r"^KNOBS = .*\n", source, re.MULTILINE).group(0)


def knob_edit(source: str) -> str:
    """An LLM reply with a search/replace edit that applies to v00 and compiles: BLOCK_K 64 -> 32."""
    line = knobs_line(source)
    assert '"BLOCK_K": 64' in line
    return ("Halve BLOCK_K to shorten each load.\n\n<<<<<<< SEARCH\n" + line + "=======\n"
            + line.replace('"BLOCK_K": 64', '"BLOCK_K": 32') + ">>>>>>> REPLACE\n")


def fsck_clean(run: Path) -> None:
    result = subprocess.run(["git", "-C", str(run), "fsck", "--full", "--strict"], check=False,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert not re.search(r"^(error|missing|broken|bad)", result.stdout + result.stderr, re.MULTILINE), result.stdout
