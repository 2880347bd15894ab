"""On an H100/H200: a ladder run in measured mode accepts a step on the interleaved A/B rule."""
import json

import pytest
from agent_support import REPO, nearpeak, trailers_at
from conftest import gpu_target_present

V00_SM90 = REPO / "kernels" / "sm90" / "bf16" / "v00_mma_v2.py"


@pytest.mark.gpu
def test_sm90_ladder_step_is_accepted_on_a_measured_speedup(capsys, tmp_path, monkeypatch):
    if gpu_target_present() != "sm90":
        pytest.skip("needs an sm90 GPU")
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    code, out, err = nearpeak(capsys, "run", "--target", "sm90", "--from", V00_SM90, "--steps", "1",
                              "--runs-dir", tmp_path, "--run-id", "gpu", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["run"]["mode"] == "measured"
    step = trailers_at(tmp_path / "gpu", "refs/heads/main")
    assert step["Verdict"] == "accepted" and step["Step"] == "1"  # wgmma beats mma_v2 by far more than noise
    low = float(step["Speedup-Measured"].split("CI ")[1].split("-")[0])
    assert low > 1.01
    assert float(step["TFLOPS-Measured"]) > 0 and step["Correct-Measured"] == "yes"
    assert step["Device"] != "none (compile-only on CPU)" and step["Timing-Method"].startswith("device events")
