"""What a reader of a run meets first: where the result is, reasons shown whole, the steps there are.

The runs come from the loop driven by the fake evaluator of tests/loop_support.py (real git ledgers, figures
chosen by the tests); the commands are the real `nearpeak` CLI.
"""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import tempfile

import pytest
from agent_support import nearpeak
from loop_support import FakeEvaluator, ScriptedProposer, make_run, optimize

from agent.evaluation import MEASURED, STATIC
from agent.executors.jobs import SCRATCH_PREFIX
from agent.loop import KERNEL, in_run_paths
from agent.reading import REASON_WIDTH, best_kernel, format_table, history, where_the_result_is


@pytest.fixture
def static_run(tmp_path):
    ledger, config = make_run(tmp_path, mode=STATIC, steps=3)
    optimize(ledger, config, ScriptedProposer(["EFF = 0.45\n"], ["EFF = 0.40\n"], ["EFF = 0.5\n"]))
    return ledger


def test_the_end_of_a_run_names_the_best_kernel_and_how_to_get_its_file(static_run, capsys):
    text = where_the_result_is(static_run)
    assert "best kernel: step 3.1, idea 1: 500.0 TFLOP/s (static estimate), 1.667x the starting kernel " \
           "(static estimate)" in text
    for command in ("nearpeak history", "nearpeak report", "nearpeak show"):
        assert f"{command} {static_run.path}" in text
    # The command it prints gets the best kernel's file out, as committed on main.
    show = re.search(r"nearpeak show (\S+) (\S+) --kernel > best.py", text)
    code, out, err = nearpeak(capsys, "show", show.group(1), show.group(2), "--kernel")
    assert code == 0, err
    assert out == "EFF = 0.5\n" == static_run.read(static_run.main_line()[-1].sha, KERNEL).decode()
    git = re.search(r"git -C (\S+) show main:kernel.py", text).group(0)
    assert subprocess.run(shlex.split(git), capture_output=True, text=True, check=True).stdout == out


def test_a_run_that_accepted_nothing_says_its_best_kernel_is_the_start(tmp_path):
    ledger, config = make_run(tmp_path, mode=STATIC, steps=1)
    optimize(ledger, config, ScriptedProposer(["EFF = 0.1\n"]))
    best = best_kernel(ledger)
    assert best.is_start and best.label == "0.0"
    assert where_the_result_is(ledger).startswith("best kernel: the starting kernel (step 0; no step was accepted)")


def test_a_measured_best_kernel_is_labelled_measured_with_its_interval(tmp_path):
    ledger, config = make_run(tmp_path, mode=MEASURED, steps=1)
    optimize(ledger, config, ScriptedProposer(["SPEEDUP = 1.25\n"]))
    best = best_kernel(ledger)
    assert best.figure == "625.0 TFLOP/s measured on Fake GPU"
    assert best.over_start.startswith("1.250x [") and best.over_start.endswith("(measured, 95% CI)")


def test_history_and_json_end_with_where_the_result_is(static_run, capsys):
    code, out, _ = nearpeak(capsys, "history", static_run.path, "--json")
    best = json.loads(out)["best"]
    assert code == 0 and best["label"] == "3.1" and best["commit"] == static_run.main_line()[-1].sha
    code, out, _ = nearpeak(capsys, "history", static_run.path)
    assert code == 0 and "best kernel: step 3.1" in out and "shared KiB" in out
    assert "regs = total VGPRs per lane (arch VGPRs, rounded up to 4" in out   # the fake run's target is gfx950


def test_reasons_are_wrapped_whole_under_their_column_never_cut(static_run):
    rows = history(static_run)
    table = format_table(rows)
    assert "…" not in table
    lines = table.splitlines()
    column = lines[0].index("reason")
    for row in rows[1:]:
        start = next(i for i, line in enumerate(lines) if line.startswith(f"{row.step}.{row.candidate} "))
        pieces = [lines[start][column:]]
        for line in lines[start + 1:]:
            if not line.startswith(" " * column):
                break
            pieces.append(line[column:])
        assert len(row.reason) > REASON_WIDTH and len(pieces) > 1   # long enough to need wrapping here
        assert all(len(p) <= REASON_WIDTH for p in pieces)
        assert " ".join(pieces) == row.reason


def test_a_reason_too_long_for_its_trailer_is_read_whole_from_step_json(tmp_path):
    ledger, config = make_run(tmp_path, mode=STATIC, steps=1)
    long = "MESSAGE = '" + "a compile error that goes on " * 20 + "'\n"
    optimize(ledger, config, ScriptedProposer([long + 'STATUS = "compile_error"\n']))
    row = history(ledger)[1]
    entry = ledger.entries()[1]
    assert len(entry.trailers["Reason"]) == 300 and len(row.reason) > 300
    assert row.reason.endswith("a compile error that goes on")
    assert " ".join(line.strip() for line in format_table([row]).splitlines()[1:]).endswith(row.reason)


def test_numbers_in_a_column_share_one_format_and_shared_memory_is_in_kib(static_run):
    rows = history(static_run)
    header, *lines = [line for line in format_table(rows).splitlines() if not line.startswith(" ")]
    tflops = [line[header.index("TFLOP/s"):].split()[0] for line in lines]
    assert tflops == ["300.0", "450.0", "400.0", "500.0"]   # the trailers say 300, 450, 400, 500
    shared = [line[header.index("shared KiB"):].split()[0] for line in lines]
    assert shared == ["64.0"] * 4 and "65536" not in format_table(rows)   # the fake kernels' 65536 bytes


@pytest.mark.parametrize("spec, message", [
    ("7", "the run has no step 7; its steps are 0 to 3"),
    ("2.4", "the run has no step 2.4; step 2 has candidate(s) 2.1"),
])
def test_show_of_a_step_the_run_lacks_lists_the_ones_it_has(static_run, capsys, spec, message):
    code, out, err = nearpeak(capsys, "show", static_run.path, spec)
    assert code == 2 and message in err and out == ""


class ScratchNamingEvaluator(FakeEvaluator):
    """Records and comparisons that name the evaluation's scratch paths, as a real evaluation's messages,
    tracebacks and profiler command lines do."""

    def record(self, path, run):
        record = super().record(path, run)
        record["message"] = f'File "{path}", line 3, in <module>'
        if run:
            record["runtime"]["profile"] = {"command": ["ncu", "-k", "gemm", "python", str(path)],
                                            "cwd": str(path.parent)}
        return record

    def compare(self, candidate, incumbent, shape, min_gain):
        comparison = super().compare(candidate, incumbent, shape, min_gain)
        comparison["files"] = {"candidate": str(candidate), "incumbent": str(incumbent)}
        return comparison


@pytest.mark.parametrize("mode", [STATIC, MEASURED])
def test_ledgers_name_kernels_by_their_place_in_the_run_not_the_scratch_directory(tmp_path, mode):
    ledger, config = make_run(tmp_path, mode=mode, steps=2)
    optimize(ledger, config, ScriptedProposer(["SPEEDUP = 1.25\nEFF = 0.4\n"], ["SPEEDUP = 1.0\nEFF = 0.2\n"]),
             evaluator=ScratchNamingEvaluator())
    for entry in ledger.entries()[1:]:
        files = ledger.files(entry.sha)
        text = b"".join(files.values()).decode()
        assert SCRATCH_PREFIX not in text and "/candidate/" not in text and str(tempfile.gettempdir()) not in text
        record = json.loads(files["evaluation.json"])
        assert record["file"] == "kernel.py" and record["message"] == 'File "kernel.py", line 3, in <module>'
        if mode == MEASURED:
            assert record["runtime"]["profile"] == {"command": ["ncu", "-k", "gemm", "python", "kernel.py"],
                                                    "cwd": "."}
            comparison = json.loads(files["step.json"])["comparison"]
            assert comparison["files"] == {"candidate": "kernel.py", "incumbent": f"{entry.parent}:kernel.py"}
            # ... and the parent's name is one git reads back: the incumbent it was compared with.
            assert ledger.repo.git.show(comparison["files"]["incumbent"]) == \
                ledger.read(entry.parent, KERNEL).decode().rstrip("\n")


def test_in_run_paths_rewrites_only_scratch_paths():
    scratch = "/tmp/nearpeak-job3-a1b2c3"
    data = {"a": [f"{scratch}/candidate/kernel.py:12: bad", f"see {scratch}/parent/kernel.py"],
            "b": "/home/me/kernels/v00.py", "c": 4, "d": f"cd {scratch}/candidate && run"}
    assert in_run_paths(data, "abc123") == {"a": ["kernel.py:12: bad", "see abc123:kernel.py"],
                                            "b": "/home/me/kernels/v00.py", "c": 4, "d": "cd . && run"}
