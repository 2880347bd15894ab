"""agent.progress: elapsed-time lines on stderr, heartbeats during long waits, silence under --json."""
import io
import time

import pytest

from agent.progress import Progress


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_lines_carry_the_elapsed_seconds():
    clock, out = FakeClock(), io.StringIO()
    progress = Progress(out, clock=clock)
    clock.now += 12.34
    progress("compiling")
    assert out.getvalue() == "[  12.3 s] compiling\n"


def test_a_task_reports_its_start_and_its_duration():
    clock, out = FakeClock(), io.StringIO()
    progress = Progress(out, heartbeat=0, clock=clock)
    with progress.task("evaluating v01"):
        clock.now += 4.0
    lines = out.getvalue().splitlines()
    assert lines == ["[   0.0 s] evaluating v01 ...", "[   4.0 s] evaluating v01: done in 4.0 s"]


def test_a_task_can_leave_the_outcome_line_to_its_caller():
    out = io.StringIO()
    progress = Progress(out, heartbeat=0, clock=FakeClock())
    with progress.task("evaluating", report_end=False):
        pass
    assert out.getvalue() == "[   0.0 s] evaluating ...\n"


def test_a_long_task_is_never_silent():
    out = io.StringIO()
    progress = Progress(out, heartbeat=0.05)
    with progress.task("waiting on the GPU"):
        time.sleep(0.3)
    stills = [line for line in out.getvalue().splitlines() if "... still waiting on the GPU" in line]
    assert len(stills) >= 2
    assert out.getvalue().splitlines()[-1].endswith("done in 0.3 s")


def test_a_failing_task_stops_its_heartbeat_and_reports_no_success():
    out = io.StringIO()
    progress = Progress(out, heartbeat=0.02)
    with pytest.raises(RuntimeError), progress.task("compiling"):
        raise RuntimeError("boom")
    text = out.getvalue()
    time.sleep(0.1)
    assert out.getvalue() == text  # the heartbeat ended with the task
    assert "done in" not in text and text.startswith("[")


def test_quiet_prints_nothing_even_during_a_long_task():
    out = io.StringIO()
    progress = Progress(out, quiet=True, heartbeat=0.01)
    progress("hello")
    with progress.task("something slow"):
        time.sleep(0.05)
    assert out.getvalue() == ""
