"""`nearpeak run/history/show/replay`: bad input gets a clear message and exit code 2, never a traceback."""
import json

import pytest
from agent_support import V00, nearpeak, need

from agent.cli import main
from evaluator.errors import EXIT_USAGE

BROKEN = '''TARGET = "gfx950"
DTYPE = "float16"
SHAPES = [(256, 256, 256)]
KNOBS = {}
def launch(a, b, c):
    raise RuntimeError("this kernel cannot even launch")
'''


@pytest.mark.parametrize("argv, message", [
    (["run", "--from", "x.py"], "no kernel file x.py"),
    (["run", "--target", "gfx950", "--from", "no/such/kernel.py"], "no kernel file"),
    (["run", "--target", "sm90", "--from", str(V00)], "declares TARGET = 'gfx950', not 'sm90'"),
    (["run", "--target", "gfx950", "--from", str(V00), "--proposer", "llm"], "the llm proposer needs an endpoint"),
    (["run", "--resume", "r", "--target", "gfx950"], "do not combine it with --target"),
    (["run", "--resume", "no-such-run"], "no run 'no-such-run'"),
    (["history", "no-such-run"], "no run 'no-such-run'"),
    (["replay", "no-such-run", "--verify"], "no run 'no-such-run'"),
])
def test_usage_errors_exit_2_with_a_message(argv, message, capsys, tmp_path):
    need(V00)
    code, out, err = nearpeak(capsys, *argv, "--runs-dir", tmp_path)
    assert code == 2
    assert message in err and "Traceback" not in err + out


def test_argument_type_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        nearpeak(capsys, "run", "--target", "gfx950", "--from", "k.py", "--steps", "0")
    assert exc.value.code == 2
    assert "must be at least 1" in capsys.readouterr().err


@pytest.mark.parametrize("argv, words", [
    (["eval", "k.py", "--shape", "12,x", "--json"], "M,N,K"),
    (["eval", "--json", "k.py", "--target", "gfx1"], "invalid choice: 'gfx1'"),
    (["eval", "k.py", "--json", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    (["history", "some-run", "--json", "--bogus"], "unrecognized arguments: --bogus"),
])
def test_a_parse_error_of_main_s_own_argv_with_json_prints_a_record(argv, words, capsys, monkeypatch):
    """`main(argv)` decides on --json from the argv it parses, not from the process's command line."""
    monkeypatch.setattr("sys.argv", ["nearpeak"])  # no --json here
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    assert exc.value.code == EXIT_USAGE
    record = json.loads(out)
    assert record["status"] == "usage_error" and words in record["message"] and words in err


def test_a_parse_error_without_json_prints_no_record(capsys, monkeypatch):
    monkeypatch.setattr("sys.argv", ["nearpeak", "eval", "k.py", "--json"])  # the process's own line is not asked
    with pytest.raises(SystemExit) as exc:
        main(["eval", "k.py", "--shape", "12,x"])
    out, err = capsys.readouterr()
    assert exc.value.code == EXIT_USAGE and out == "" and "M,N,K" in err


@pytest.mark.slow  # evaluates kernels in sandboxed interpreters
def test_a_starting_kernel_that_fails_exits_1_and_creates_no_run(capsys, tmp_path):
    kernel = tmp_path / "broken.py"
    kernel.write_text(BROKEN)
    code, _, err = nearpeak(capsys, "run", "--target", "gfx950", "--from", kernel, "--runs-dir", tmp_path / "runs",
                            "--run-id", "broken")
    assert code == 1
    assert "the starting kernel does not evaluate" in err and "cannot even launch" in err
    assert not (tmp_path / "runs" / "broken").exists()


def test_a_run_id_in_use_is_refused(capsys, tmp_path):
    (tmp_path / "runs" / "taken").mkdir(parents=True)
    (tmp_path / "runs" / "taken" / "file").write_text("x")
    code, _, err = nearpeak(capsys, "run", "--target", "gfx950", "--from", need(V00), "--runs-dir",
                            tmp_path / "runs", "--run-id", "taken")
    assert code == 2 and "already exists" in err


@pytest.mark.slow  # evaluates kernels in sandboxed interpreters
def test_wall_budget_stops_cleanly_and_resume_continues(capsys, tmp_path):
    runs = tmp_path / "runs"
    code, out, err = nearpeak(capsys, "run", "--target", "gfx950", "--from", need(V00), "--runs-dir", runs,
                              "--run-id", "budget", "--max-wall", "0")
    assert code == 0, err
    assert "wall-clock budget of 0 s reached" in out and "\n1.1 " not in out
    code, out, err = nearpeak(capsys, "run", "--resume", "budget", "--runs-dir", runs, "--steps", "1")
    assert code == 0, err
    assert "all 1 steps done" in out and "\n1.1 " in out


@pytest.mark.slow  # evaluates kernels in sandboxed interpreters
def test_bare_run_starts_from_the_gfx950_ladder(capsys, tmp_path):
    need(V00)
    code, out, err = nearpeak(capsys, "run", "--steps", "1", "--runs-dir", tmp_path)
    assert code == 0, err
    assert "starting from" in err and "v00_naive.py" in err
    assert "static estimate" in out + err
    assert "best kernel: " in out and "--kernel > best.py" in out and "nearpeak report " in out
