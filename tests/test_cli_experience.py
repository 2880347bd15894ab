"""What a newcomer meets on the command line: no stray warnings, fast and clear failures, visible progress."""
from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest
from agent_support import REPO, nearpeak
from conftest import gpu_target_present
from loop_support import FakeEvaluator, ScriptedProposer, make_run

from agent.evaluation import MEASURED, Evaluator, resources_misfit, screen
from agent.executors.inline import InlineExecutor
from agent.progress import Progress
from evaluator.errors import EXIT_NO_DEVICE


def test_importing_torch_without_numpy_prints_no_warning():
    # A CPU-only install has no NumPy; torch warns about that on import unless nearpeak silenced it first.
    script = "import sys; sys.modules['numpy'] = None; import evaluator, torch; print('imported')"
    result = subprocess.run([sys.executable, "-W", "default", "-c", script], cwd=REPO, check=False,
                            capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "imported", result.stderr
    assert "NumPy" not in result.stderr, result.stderr


HANGS_AT_IMPORT = '''TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(1024, 1024, 1024)]
KNOBS = {}
while True:
    pass
'''


def test_a_syntax_error_is_labelled_syntax_error(tmp_path):
    from evaluator.api import evaluate

    kernel = tmp_path / "broken.py"
    kernel.write_text('TARGET = "sm90"\ndef launch(a, b, c)\n    pass\n')
    record = evaluate(kernel, target="sm90", run=False)
    assert record["status"] == "syntax_error" and record["line"] == 2
    assert record["message"].startswith("syntax error: ") and "def launch(a, b, c)" in record["message"]


@pytest.mark.parametrize("argv, message", [
    (["eval", "README.md"], "README.md is not a Python kernel file"),
    (["eval", "tests/kernels/small_sm90.py", "--dump", "README.md"], "--dump README.md: a file is in the way"),
    (["eval", "tests/kernels/small_sm90.py", "--profile"], "--profile needs --run"),
    (["eval", "no/such/kernel.py"], "no such kernel file"),
])
def test_eval_refuses_what_cannot_work_before_compiling(argv, message, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    code, out, err = nearpeak(capsys, *argv)
    assert code == 2 and message in err and "Traceback" not in out + err


def test_ladder_run_without_its_gpu_fails_before_compiling(capsys, monkeypatch):
    import evaluator.ladder

    if gpu_target_present() == "sm90":
        pytest.skip("an sm90 GPU is here: the ladder would run")

    def compile_everything(*args, **kwargs):
        raise AssertionError("the ladder was compiled although it cannot run")

    monkeypatch.setattr(evaluator.ladder, "ladder_records", compile_everything)
    code, _, err = nearpeak(capsys, "ladder", "--target", "sm90", "--run")
    assert code == EXIT_NO_DEVICE and "nearpeak ladder: --run: " in err and "sm90" in err


def test_candidate_timeout_ends_a_hanging_evaluation(tmp_path):
    kernel = tmp_path / "hangs.py"
    kernel.write_text(HANGS_AT_IMPORT)
    started = time.monotonic()
    record = Evaluator("sm90", seed=0, timeout_s=3.0).record(kernel, run=False)
    assert record["status"] == "timeout" and "3 s" in record["message"]
    assert time.monotonic() - started < 60


def test_run_timeout_is_kept_in_the_run_and_can_change_on_resume(tmp_path, capsys):
    from agent.runs import Resume, resume_run

    ledger, config = make_run(tmp_path)
    ledger.unlock()
    assert config.candidate_timeout == 600.0
    resumed, new = resume_run(Resume(run=str(ledger.path), runs_dir=tmp_path, timeout=45.0), Progress(quiet=True))
    resumed.unlock()
    assert new.candidate_timeout == 45.0
    with pytest.raises(SystemExit):
        nearpeak(capsys, "run", "--timeout", "0")
    assert "must be above 0" in capsys.readouterr().err


def test_a_kernel_that_cannot_fit_in_shared_memory_is_screened_out(static_eval):
    # v03 with an 8-slot ring: 262208 bytes of shared memory, over an H200's 232448 per CTA.
    record = static_eval(str(REPO / "kernels" / "sm90" / "bf16" / "v03_tma_ring.py"), None, None,
                         (("NUM_STAGES", 8),))
    assert record["status"] == "ok"
    assert screen(record, max_spills=0) == ("does not fit on sm90: 262208 bytes of shared memory/LDS per CTA, "
                                            "above the limit of 232448; it would fail at launch")


@pytest.mark.parametrize("target, static, problem", [
    ("gfx950", {"registers": 600, "num_warps": 4}, "600 registers per thread, above the limit of 512"),
    ("gfx950", {"registers": 256, "shared_bytes": 200000}, ("200000 bytes of shared memory/LDS per CTA, above the "
                                                           "limit of 163840")),
    ("sm90", {"registers": 168, "num_warps": 16}, ("168 registers x 512 threads = 86016 per CTA, above the register "
                                                  "file of 65536")),
])
def test_resources_beyond_the_targets_limits_are_named(target, static, problem):
    assert resources_misfit({"target": target, "static": static}) == problem


@pytest.mark.parametrize("target, static", [
    ("sm90", {"registers": 255, "num_warps": 8, "shared_bytes": 232448}),   # 65280 registers: the file holds it
    ("gfx950", {"registers": 512, "num_warps": 16, "shared_bytes": 163840}),
])
def test_resources_at_the_limits_fit(target, static):
    assert resources_misfit({"target": target, "static": static}) is None


def resumable(tmp_path, monkeypatch, evaluator):
    """A fake measured run under tmp_path/runs, and `nearpeak run --resume` wired to a fake evaluator."""
    import agent.cli

    ledger, _ = make_run(tmp_path / "runs", mode=MEASURED, steps=1)
    ledger.unlock()
    proposer = ScriptedProposer(["SPEEDUP = 1.3\nINTERRUPT = True\n"], ["SPEEDUP = 1.5\n"])
    monkeypatch.setattr(agent.cli, "make_proposer", lambda *args: proposer)
    monkeypatch.setattr(agent.cli, "Evaluator", lambda *args: evaluator)
    monkeypatch.setattr(agent.cli, "make_executor", lambda *args, **kwargs: InlineExecutor(evaluator))
    return ledger.path


def test_ctrl_c_names_the_resume_command(tmp_path, capsys, monkeypatch):
    run = resumable(tmp_path, monkeypatch, FakeEvaluator(interrupt=True))
    code, _, err = nearpeak(capsys, "run", "--resume", run, "--steps", "2")
    assert code == 130
    assert f"interrupted; continue with: nearpeak run --resume {run}" in err


def test_the_stop_reason_is_said_once_and_progress_has_timings(tmp_path, capsys, monkeypatch):
    run = resumable(tmp_path, monkeypatch, FakeEvaluator())
    code, out, err = nearpeak(capsys, "run", "--resume", run, "--steps", "2")
    assert code == 0, err
    assert (out + err).count("all 2 steps done") == 1
    assert re.search(r"^\[ *\d+\.\d s\] \[step 2/2\] candidate 1 idea 1: evaluating \.\.\.$", err, re.MULTILINE)
    assert "[step 1/2] candidate 1 idea 1: passed" in err and "[step 1/2] accepted step 1.1; promoted candidate 1" in err


def test_replay_verify_reports_each_step_as_it_goes(tmp_path, capsys, monkeypatch):
    run = resumable(tmp_path, monkeypatch, FakeEvaluator())
    code, out, err = nearpeak(capsys, "replay", run, "--verify")
    assert code == 0, out + err
    assert re.search(r"\[1/1\] re-evaluating step 0 \([0-9a-f]{12}\) \.\.\.", err)
    assert re.search(r"\[1/1\] re-evaluating step 0 \([0-9a-f]{12}\): done in \d+\.\d s", err)
    assert "verify: 1/1 accepted step(s) reproduced" in out
