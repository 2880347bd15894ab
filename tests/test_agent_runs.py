"""Run creation is atomic: a kill at any moment leaves a complete run or none, never a half-made directory."""
import os
import random
import signal
import subprocess
import sys
import time

import pytest
from agent_support import REPO, fsck_clean

from agent.ledger import Ledger
from agent.runs import STAGING_PREFIX, create_atomically, remove_stale_staging

CREATOR = """
import sys
from pathlib import Path
from agent.runs import create_atomically
runs = Path(sys.argv[1])
n = 0
while True:
    files = {"kernel.py": f"version = {n}\\n".encode(), "evaluation.json": (str(n) * 200000).encode()}
    create_atomically(runs / f"run{n}", files, f"start {n}\\n\\nStep: 0\\nVerdict: baseline\\n").unlock()
    n += 1
"""


@pytest.mark.slow  # four writer processes, each killed after a second or so
def test_sigkill_during_run_creation_leaves_whole_runs_or_none(tmp_path):
    runs = tmp_path / "runs"
    rng = random.Random(3)
    for _ in range(4):
        creator = subprocess.Popen([sys.executable, "-c", CREATOR, str(runs)], cwd=REPO, start_new_session=True,
                                   env={**os.environ, "PYTHONPATH": str(REPO)})
        time.sleep(rng.uniform(1.0, 2.0))
        assert creator.poll() is None, "the creator stopped on its own"
        os.killpg(creator.pid, signal.SIGKILL)  # git children die mid-write too
        creator.wait()
        made = sorted(p for p in runs.iterdir() if not p.name.startswith(STAGING_PREFIX))
        assert made, "no run was created before the kill"
        for path in made:   # every run that exists under its name is complete and readable
            ledger = Ledger(path)
            (root,) = ledger.main_line()
            assert ledger.read(root.sha, "kernel.py") == f"version = {path.name[3:]}\n".encode()
            fsck_clean(path)
        # The name being created when the kill came is free again: a new run takes it and sweeps the debris.
        missing = runs / f"run{len(made)}"
        assert not missing.exists()
        create_atomically(missing, {"kernel.py": b"again\n"}, "again\n\nStep: 0\nVerdict: baseline\n").unlock()
        assert not list(runs.glob(f"{STAGING_PREFIX}*"))
        for path in runs.iterdir():
            if path.name.startswith("run"):
                subprocess.run(["rm", "-rf", str(path)], check=True)


def test_staging_of_a_live_process_is_left_alone(tmp_path):
    live = tmp_path / f"{STAGING_PREFIX}x-{os.getpid()}"
    dead = tmp_path / f"{STAGING_PREFIX}y-999999999"
    live.mkdir()
    dead.mkdir()
    assert remove_stale_staging(tmp_path) == [dead]
    assert live.is_dir() and not dead.exists()
