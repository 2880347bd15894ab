"""The climb (agent.climb), its plot and the HTML report (agent.report), on fake runs and on the H200 ledger.

The runs come from the loop driven by the fake evaluator of tests/loop_support.py, so they are real ledgers
whose figures the tests choose; the H200 ledger is the one benchmarks/results/ keeps from a measured run.
"""
from __future__ import annotations

import html
import math
import shutil
import subprocess
import sys
import tarfile
from html.parser import HTMLParser

import pytest
from agent_support import REPO, nearpeak
from loop_support import ScriptedProposer, make_run, optimize

from agent.climb import RUNTIME_RECORD, SAME_SESSION, Ratio, climb
from agent.evaluation import MEASURED, STATIC
from agent.ledger import Ledger
from agent.proposers import Candidate
from agent.reading import format_table, history, shorten

H200_LEDGER = REPO / "benchmarks" / "results" / "agent_run_h200_ledger.tgz"
V10_LEDGER = REPO / "benchmarks" / "results" / "sm90_v10_ladder_run.tgz"
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def measured_run(tmp_path):
    """Three steps: 1.25x accepted, a slower candidate rejected, then 1.04x accepted although its separately
    timed TFLOP/s came out lower than step 1's (the drift the issue saw on the H200)."""
    ledger, config = make_run(tmp_path, mode=MEASURED, steps=3)
    optimize(ledger, config, ScriptedProposer(["SPEEDUP = 1.25\n"], ["SPEEDUP = 1.0\n"],
                                              ["SPEEDUP = 1.3\nTFLOPS = 600.0\n"]))
    return ledger


@pytest.fixture
def static_run(tmp_path):
    ledger, config = make_run(tmp_path, mode=STATIC, steps=2)
    optimize(ledger, config, ScriptedProposer(["EFF = 0.45\n"], ["EFF = 0.40\n"]))
    return ledger


@pytest.fixture
def h200_run(tmp_path):
    with tarfile.open(H200_LEDGER) as archive:
        archive.extractall(tmp_path, filter="data")
    return tmp_path / "h200-ladder"


def test_ratios_multiply_and_their_intervals_add_in_log_space():
    a, b = Ratio(1.2, 1.1, 1.3), Ratio(1.1, 1.05, 1.2)
    product = a.times(b)
    assert product.value == pytest.approx(1.32)
    assert math.log(product.value / product.low) == pytest.approx(math.hypot(math.log(1.2 / 1.1),
                                                                             math.log(1.1 / 1.05)))
    assert math.log(product.high / product.value) == pytest.approx(math.hypot(math.log(1.3 / 1.2),
                                                                              math.log(1.2 / 1.1)))
    assert Ratio(1.5, 1.5, 1.5).times(Ratio(2.0, 2.0, 2.0)) == Ratio(3.0, 3.0, 3.0)
    exact = Ratio(1.0, 1.0, 1.0).times(Ratio(3.057, 2.968, 3.143))  # the first step: its own interval
    assert (exact.low, exact.high) == pytest.approx((2.968, 3.143))


def test_accepted_steps_climb_even_when_separate_tflops_drift_down(measured_run):
    c = climb(measured_run)
    accepted = c.accepted
    assert [p.step for p in accepted] == [0, 1, 3]
    # TFLOP/s of separate timings went down from step 1 to step 3 (625 -> 600) ...
    # ... but the chained interleaved speedups go up: 1.25, then 1.25 * 1.04.
    assert [round(p.cumulative.value, 4) for p in accepted] == [1.0, 1.25, 1.3]
    assert accepted[2].speedup.value == pytest.approx(1.04)
    assert accepted[2].cumulative.low < 1.3 < accepted[2].cumulative.high
    widths = [p.cumulative.high / p.cumulative.low for p in accepted]
    assert widths[0] == 1.0 and widths[1] < widths[2]  # each step adds its own uncertainty
    assert c.shape == (512, 256, 128) and c.device == "Fake GPU" and c.vendor == "fake BLAS"


def test_a_rejected_candidate_is_placed_relative_to_its_own_incumbent(measured_run):
    rejected = next(p for p in climb(measured_run).points if p.step == 2)
    assert not rejected.on_main and rejected.verdict == "rejected"
    assert rejected.speedup.value == pytest.approx(0.8) and rejected.cumulative.value == pytest.approx(1.0)


def test_vendor_ratios_come_from_the_comparison_session(measured_run):
    accepted = climb(measured_run).accepted
    assert [p.vendor_source for p in accepted[1:]] == [SAME_SESSION, SAME_SESSION]
    assert accepted[2].vs_vendor.value == pytest.approx(0.8 * 1.3)
    assert accepted[0].vendor_source == RUNTIME_RECORD  # the start has no comparison of its own


def test_history_shows_the_climb_figures(measured_run):
    rows = history(measured_run)
    table = format_table(rows)
    header = table.splitlines()[0]
    assert "x incumbent" in header and "x start" in header and "vs vendor" in header
    step3 = next(line for line in table.splitlines() if line.startswith("3.1"))
    # x incumbent, x start, vs vendor (0.8 x 1.3 = 1.04 here), each with its 95% interval
    assert "1.040 [1.030,1.050]  1.300 [1.282,1.318]  1.040 [1.019,1.061]  600.0 " in step3


def test_a_static_run_s_tables_show_its_objective_labelled_a_static_estimate(static_run):
    from agent.report import html_report

    rows = history(static_run)
    estimates = [r.tflops_estimate for r in rows]
    assert len(set(estimates)) == 3 and "n/a" not in estimates  # baseline, accepted, rejected: each its own
    lines = format_table(rows).splitlines()
    assert "TFLOP/s (static est.)" in lines[0] and "TFLOP/s (measured)" not in lines[0]
    column = lines[0].index("TFLOP/s (static est.)")
    row_lines = [line for line in lines[1:] if not line.startswith(" ")]  # not a wrapped reason's further lines
    assert len(row_lines) == len(rows)
    for row, line in zip(rows, row_lines):
        assert line[column:].startswith(f"{float(row.tflops_estimate):.1f} ")
    page = html_report(static_run)
    assert "<th>TFLOP/s (static est.)</th>" in page and "TFLOP/s (measured)" not in page
    assert f"<td>{float(estimates[1]):.1f}</td>" in page   # formatted as the text table formats it


def test_a_measured_run_s_table_shows_measured_tflops(measured_run):
    header = format_table(history(measured_run)).splitlines()[0]
    assert "TFLOP/s (measured)" in header and "TFLOP/s (static est.)" not in header


def test_static_climb_is_labelled_a_static_estimate_everywhere(static_run):
    from agent.report import climb_figure

    c = climb(static_run)
    assert [round(p.cumulative.value, 4) for p in c.accepted] == [1.0, 1.5]
    assert all(p.vs_vendor is None for p in c.points) and "static estimate" in c.figure
    assert "1.500 est." in format_table(history(static_run))
    figure = climb_figure(c)
    assert "static estimate" in figure.axes[0].get_title() and "1024x1024x512" in figure.axes[0].get_title()
    assert "static estimate" in figure.axes[0].get_ylabel()


def test_a_beam_search_climb_chains_every_lineage_from_its_own_parent(tmp_path):
    from agent.report import climb_figure

    ledger, config = make_run(tmp_path, mode=STATIC, steps=2, candidates=2, strategy="beam", beam=2)
    optimize(ledger, config, ScriptedProposer(["EFF = 0.5\n", "EFF = 0.4\n"], ["EFF = 0.45\n", "EFF = 0.6\n"]))
    c = climb(ledger)
    assert [(p.step, round(p.cumulative.value, 3)) for p in c.accepted] == [(0, 1.0), (1, 1.667), (2, 2.0)]
    assert [(p.step, p.candidate, round(p.cumulative.value, 3)) for p in c.other_lineages] == [(1, 2, 1.333)]
    labels = climb_figure(c).axes[0].get_legend_handles_labels()[1]
    assert "accepted in another lineage (beam search)" in labels


def test_measured_plot_shows_error_bars_marks_and_the_vendor_level(measured_run):
    from agent.report import climb_figure

    figure = climb_figure(climb(measured_run))
    ax = figure.axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert "incumbent (best so far): cumulative speedup, 95% CI" in labels
    assert any(label.startswith("rejected") for label in labels)
    assert any(label.startswith("fake BLAS = 1.0") for label in labels)
    title = ax.get_title()
    assert "512x256x128" in title and "Fake GPU" in title and "measured" in title
    vendor_line = next(line for line in ax.get_lines() if line.get_linestyle() == "--")
    assert vendor_line.get_ydata()[0] == pytest.approx(1.3 / (0.8 * 1.3))  # where the vendor sits: 1 / 0.8


def test_the_climb_line_follows_the_incumbent_flat_through_a_rejected_step(measured_run):
    from agent.report import climb_figure

    c = climb(measured_run)
    # 1.25x accepted at step 1, step 2 rejected (the incumbent stays), 1.04x more at step 3.
    assert [(s, round(v, 4)) for s, v in c.incumbent_line()] == [(0, 1.0), (1, 1.0), (1, 1.25), (3, 1.25), (3, 1.3)]
    line = next(line for line in climb_figure(c).axes[0].get_lines() if line.get_label().startswith("incumbent"))
    assert list(line.get_xdata()) == [0, 1, 1, 3, 3]


def test_the_line_runs_on_to_the_last_step_when_the_last_steps_accepted_nothing(tmp_path):
    ledger, config = make_run(tmp_path, mode=STATIC, steps=3)
    optimize(ledger, config, ScriptedProposer(["EFF = 0.45\n"], ["EFF = 0.40\n"], ["EFF = 0.35\n"]))
    assert [(s, round(v, 3)) for s, v in climb(ledger).incumbent_line()] == [(0, 1.0), (1, 1.0), (1, 1.5), (3, 1.5)]


class IdeaProposer:
    """One candidate a step, each naming the planned idea it implements as the llm proposer's do (its number
    in the step's plan) or as a title of its own."""

    name = "ideas"

    def __init__(self, *items):
        self.items = list(items)

    def propose(self, context):
        if not self.items:
            return []
        source, meta = self.items.pop(0)
        return [Candidate(source, "because", "a title", meta=meta)]

    def observe(self, candidate, outcome):
        pass


def test_points_are_labelled_with_their_step_and_idea_where_the_ledger_has_one(tmp_path):
    from agent.climb_svg import climb_svg, point_label

    ledger, config = make_run(tmp_path, mode=STATIC, steps=3)
    long = "double-buffer the LDS tiles so that loads of the next K step overlap the MFMAs"
    optimize(ledger, config, IdeaProposer(("EFF = 0.45\n", {"idea": "double-buffer the LDS tiles"}),
                                          ("EFF = 0.40\n", {"idea": long}), ("EFF = 0.50\n", {})))
    c = climb(ledger)
    labels = [point_label(p) for p in c.points]
    assert labels[:2] == ["0.0 base.py", "1.1 double-buffer the LDS tiles"] and labels[3] == "3.1 a title"
    assert labels[2] == "2.1 double-buffer the LDS tiles so…"   # cut at a word; the tooltip has it whole
    svg = climb_svg(c, "title")
    assert "1.1 double-buffer the LDS tiles</text>" in svg and f"idea: {long}" in svg


def test_an_idea_named_by_its_number_in_the_step_s_plan_is_read_from_the_plan():
    from agent.climb import _idea

    plan = {"status": "ok", "ideas": [{"number": 1, "title": "split K"}, {"number": 2, "title": "wider tiles"}]}
    assert _idea({"proposal": {"idea": 2}, "plan": plan}) == "wider tiles"
    assert _idea({"proposal": {"idea": 3}, "plan": plan}) == "" and _idea({}) == ""


def test_report_without_o_is_written_into_the_run_s_folder_and_kept_out_of_its_git(static_run, capsys):
    code, out, err = nearpeak(capsys, "report", static_run.path)
    assert code == 0, err
    assert out.strip() == f"report: {static_run.path / 'report.html'}"
    assert (static_run.path / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert static_run.repo.git.status("--porcelain") == ""
    assert static_run.recover() == [] and (static_run.path / "report.html").exists()   # not cleaned away


def test_shorten_cuts_at_a_word_boundary():
    text = "speedup 1.2889x, 95% CI [1.2734, 1.3044] (interleaved A/B: 20 rounds x 10 calls each side)"
    short = shorten(text, 40)
    assert len(short) <= 40 and short.endswith("…")
    assert text.startswith(short[:-1]) and text[len(short) - 1] in " ,"  # cut between words
    assert shorten("short", 40) == "short"


class ReportParser(HTMLParser):
    """What a report holds: images, inline SVG plots and their point labels, external references, table rows,
    step sections, diff lines."""

    def __init__(self):
        super().__init__()
        self.images, self.external, self.history_rows, self.sections, self.diff_lines = [], [], 0, [], []
        self.svgs, self.incumbent_lines, self.point_groups = 0, [], []
        self._in_history = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img":
            self.images.append(attrs.get("src", ""))
        if tag == "svg":
            self.svgs += 1
        if tag == "polyline" and attrs.get("class") == "incumbent":
            self.incumbent_lines.append(attrs["points"])
        if tag == "g" and attrs.get("class", "").startswith("point"):
            self.point_groups.append(attrs["class"])
        for key in ("src", "href"):
            if attrs.get(key, "").startswith(("http:", "https:", "//", "file:")):
                self.external.append(attrs[key])
        if tag in ("link", "script"):
            self.external.append(tag)
        if tag == "table":
            self._in_history = attrs.get("class") == "history"
        if tag == "tr" and self._in_history and attrs.get("class"):
            self.history_rows += 1
        if tag == "section":
            self.sections.append(attrs.get("id"))
        if tag == "span" and attrs.get("class") in ("add", "del"):
            self.diff_lines.append(attrs["class"])


def report_of(ledger):
    from agent.report import html_report

    parser = ReportParser()
    text = html_report(ledger)
    parser.feed(text)
    return text, parser


def test_html_report_is_self_contained_with_plot_history_and_diffs(measured_run):
    text, report = report_of(measured_run)
    assert report.external == []
    assert report.images == [] and report.svgs == 1 and len(report.incumbent_lines) == 1   # the plot, inline
    assert report.point_groups == ["point main", "point main", "point rejected", "point main"]
    assert report.history_rows == len(history(measured_run)) == 4
    assert report.sections == ["step-1", "step-3"]
    assert report.diff_lines.count("add") >= 2 and report.diff_lines.count("del") >= 2
    assert "1.300x [" in text and "fake BLAS" in text


def test_report_and_svg_plot_need_no_matplotlib(measured_run, monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)   # `import matplotlib` now fails, as without the extra
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    text, report = report_of(measured_run)
    assert report.svgs == 1 and len(report.incumbent_lines) == 1 and "pip install" not in text
    assert report.history_rows == 4 and report.sections == ["step-1", "step-3"]
    code, out, err = nearpeak(capsys, "replay", measured_run.path, "--plot", tmp_path / "climb.svg")
    assert code == 0, err
    svg = (tmp_path / "climb.svg").read_text()
    assert svg.startswith("<svg ") and 'class="incumbent"' in svg and f"plot: {tmp_path / 'climb.svg'}" in out
    code, _, err = nearpeak(capsys, "replay", measured_run.path, "--plot", tmp_path / "climb.png")
    assert code == 2 and "needs matplotlib" in err and ".svg plot needs nothing" in err


def test_report_and_plot_of_the_h200_ledger(h200_run, capsys, tmp_path):
    code, out, err = nearpeak(capsys, "replay", h200_run, "--plot", tmp_path / "climb.png")
    assert code == 0, err
    assert (tmp_path / "climb.png").read_bytes().startswith(PNG)
    code, out, err = nearpeak(capsys, "report", h200_run, "-o", tmp_path / "report.html")
    assert code == 0, err and f"report: {tmp_path / 'report.html'}" in out
    text = (tmp_path / "report.html").read_text()
    assert "sm90, 4096x4096x4096, NVIDIA H200, 2026-11-29" in text and "1.289x [1.273, 1.304]" in text
    assert html.escape(RUNTIME_RECORD) in text  # this ledger predates vs_vendor in comparisons, and says where it comes from


def test_figures_timed_at_another_shape_are_left_out_or_named(tmp_path):
    # The v10 run compared at 256x8192x8192; its starting kernel's runtime record timed 4096^3.
    with tarfile.open(V10_LEDGER) as archive:
        archive.extractall(tmp_path, filter="data")
    c = climb(Ledger(tmp_path / "h200-v10"))
    assert c.shape == (256, 8192, 8192)
    start, step1 = c.accepted
    assert start.vs_vendor is None and step1.vs_vendor is not None
    assert step1.cumulative.value == pytest.approx(3.057, abs=1e-3)
    baseline = format_table(history(Ledger(tmp_path / "h200-v10"))).splitlines()[1]
    assert "678.6 @4096x4096x4096" in baseline  # a TFLOP/s figure of another shape says so


@pytest.mark.parametrize("argv, message", [
    (["report", "RUN", "-o", "no/such/dir/r.html"], "no directory no/such/dir"),
    (["replay", "RUN", "--plot", "."], "is a directory"),
])
def test_unwritable_outputs_are_refused_before_any_work(argv, message, h200_run, capsys):
    code, _, err = nearpeak(capsys, *[str(h200_run) if a == "RUN" else a for a in argv])
    assert code == 2 and message in err and "Traceback" not in err


CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-headless-shell", "chromium-browser",
                                           "google-chrome") if shutil.which(n)), None)


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium here (apt-get install chromium-headless-shell); "
                                              "the report's structure is tested with html.parser above")
def test_report_opens_in_headless_chromium_with_its_plot_decoded(measured_run, tmp_path):
    from agent.report import html_report

    # A probe script, added to a copy only, writes what the browser made of each image into the DOM.
    probe = "<script>document.body.dataset.images = Array.from(document.images)" \
            ".map(i => i.complete + ':' + i.naturalWidth).join(',');</script></body>"
    page = tmp_path / "report.html"
    page.write_text(html_report(measured_run).replace("</body>", probe))
    result = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                             page.as_uri()], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert 'data-images=""' in result.stdout and result.stdout.count("<svg") == 1  # the plot is inline SVG
    assert result.stdout.count('<tr class="') == 4 and "step 3:" in result.stdout
