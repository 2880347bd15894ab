"""A ladder run on gfx950 from v00 with neither a GPU nor an API key, then reading it back."""
import contextlib
import io
import json

import pytest
from agent_support import LADDER, V00, file_at, fsck_clean, git, nearpeak, need, refs

from agent.cli import main
from agent.proposers.ladder import default_ladder_dir
from agent.source import declaration
from evaluator.ladder import ladder_dirs, stage_paths
from evaluator.targets import known_targets

pytestmark = pytest.mark.slow  # end to end: real compiles, sandboxed evaluations and a git ledger


@pytest.fixture(scope="module")
def ladder_run(tmp_path_factory):
    """Three ladder steps from v00 (the default proposer without an endpoint); run once for the module."""
    need(V00)
    runs = tmp_path_factory.mktemp("runs")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["run", "--target", "gfx950", "--from", str(V00), "--steps", "3", "--runs-dir", str(runs),
                     "--run-id", "ladder", "--json"])
    assert code == 0, err.getvalue()
    return runs / "ladder", json.loads(out.getvalue()), err.getvalue()


def test_ladder_run_takes_three_steps_up_the_reference_stages(ladder_run):
    run, result, progress = ladder_run
    assert result["run"]["proposer"] == "ladder" and result["run"]["mode"] == "static"
    assert "static estimate" in result["run"]["objective"]
    assert result["steps_run"] == [1, 2, 3]
    entries = result["entries"]
    assert [e["step"] for e in entries] == [0, 1, 2, 3]
    assert entries[0]["verdict"] == "baseline"
    # Every step proposed a later stage of the ladder than the one before it, as the file itself.
    stages = [declaration(file_at(run, e["commit"], "kernel.py"), "STAGE") for e in entries]
    assert stages == sorted(stages) and len(set(stages)) == 4 and stages[0] == "v00"
    for e, stage in zip(entries[1:], stages[1:]):
        reference = next(LADDER.glob(f"{stage}_*.py")).read_text()
        assert file_at(run, e["commit"], "kernel.py") == reference
        assert e["verdict"] in ("accepted", "rejected")
        assert "static estimate" in e["reason"]
    # Accepted steps are on main (oldest first), the others on attempt refs.
    main_steps = [json.loads(file_at(run, sha, "step.json"))["step"]
                  for sha in git(run, "rev-list", "--first-parent", "--reverse", "main").split()]
    assert main_steps == [0] + [e["step"] for e in entries if e["verdict"] == "accepted"]
    assert result["best"]["commit"] == git(run, "rev-parse", "main").strip()   # where the result is
    assert {f"refs/attempts/{e['step']}-1" for e in entries if e["verdict"] == "rejected"} == \
        set(refs(run)) - {"refs/heads/main"}
    assert progress == ""  # --json: stdout is the result, stderr is kept for errors
    assert git(run, "status", "--porcelain") == ""
    fsck_clean(run)


def test_root_commit_holds_run_json_kernel_and_evaluation(ladder_run):
    run, _, _ = ladder_run
    root = git(run, "rev-list", "--max-parents=0", "main").strip()
    assert sorted(git(run, "ls-tree", "--name-only", root).split()) == \
        ["evaluation.json", "kernel.py", "run.json", "step.json"]
    config = json.loads(file_at(run, root, "run.json"))
    assert config["target"] == "gfx950" and config["seed"] == 0 and config["min_gain"] == 0.01
    assert file_at(run, root, "kernel.py") == V00.read_text()
    record = json.loads(file_at(run, root, "evaluation.json"))
    assert record["status"] == "ok" and record["file"] == "kernel.py" and record["static"]["registers"] > 0
    author = git(run, "log", "-1", "--format=%an <%ae> / %cn", root).strip()
    assert author == "nearpeak <nearpeak@localhost> / nearpeak"


def test_history_lists_every_step_with_figures(ladder_run, capsys):
    run, result, _ = ladder_run
    code, out, _ = nearpeak(capsys, "history", run, "--json")
    assert code == 0
    assert json.loads(out)["entries"] == result["entries"]
    code, out, _ = nearpeak(capsys, "history", run)
    assert code == 0 and "eff (static est.)" in out and out.count("\n3.1 ") == 1


def test_show_prints_the_diff_and_evaluation_of_a_step(ladder_run, capsys):
    run, _, _ = ladder_run
    code, out, _ = nearpeak(capsys, "show", run, "3")
    assert code == 0
    assert "--- diff against the incumbent ---" in out and '+STAGE = "v0' in out
    assert '"estimated_efficiency"' in out
    code, _, err = nearpeak(capsys, "show", run, "7")
    assert code == 2 and "no step 7" in err


def test_replay_verify_reproduces_every_accepted_step_and_plots(ladder_run, capsys, tmp_path):
    pytest.importorskip("matplotlib")
    run, result, _ = ladder_run
    png = tmp_path / "climb.png"
    code, out, _ = nearpeak(capsys, "replay", run, "--verify", "--plot", png)
    accepted = 1 + sum(e["verdict"] == "accepted" for e in result["entries"])
    assert code == 0, out
    assert f"verify: {accepted}/{accepted} accepted step(s) reproduced" in out
    assert "repository: git fsck clean" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_replay_verify_flags_a_record_that_does_not_match(ladder_run, capsys, tmp_path):
    """Tamper with a copy of the ledger: the recorded register count no longer matches the compiler."""
    run, _, _ = ladder_run
    copy = tmp_path / "copy"
    git(tmp_path, "clone", "-q", str(run), str(copy))
    record = json.loads((copy / "evaluation.json").read_text())
    record["static"]["registers"] += 1
    (copy / "evaluation.json").write_text(json.dumps(record))
    git(copy, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-am", "tampered\n\nStep: 9\nVerdict: x")
    code, out, _ = nearpeak(capsys, "replay", copy, "--verify")
    assert code == 1
    assert f"static registers: {record['static']['registers']} -> {record['static']['registers'] - 1}" in out


def test_each_ladder_is_the_default_for_the_dtype_its_stages_declare():
    for target in known_targets():
        ladders = ladder_dirs(target)
        assert default_ladder_dir(target) == ladders[0]
        for directory in ladders:
            first = stage_paths(directory)[0]
            assert default_ladder_dir(target, declaration(first.read_text(), "DTYPE")) == directory
