"""What a newcomer meets on the command line: no stray warnings, fast and clear failures, visible progress."""
from __future__ import annotations

import subprocess
import sys

from agent_support import REPO


def test_importing_torch_without_numpy_prints_no_warning():
    # A CPU-only install has no NumPy; torch warns about that on import unless nearpeak silenced it first.
    script = "import sys; sys.modules['numpy'] = None; import evaluator, torch; print('imported')"
    result = subprocess.run([sys.executable, "-W", "default", "-c", script], cwd=REPO, check=False,
                            capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "imported", result.stderr
    assert "NumPy" not in result.stderr, result.stderr
