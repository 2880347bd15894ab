"""A run shown to a person: the climb plot (SVG with no plotting library, or matplotlib) and a self-contained
HTML report.

The report is one file that opens in a browser with no server and no network: the plot is an inline SVG
(agent.climb_svg, so the report needs no matplotlib), the styles are inline, and every step's diff is in the
page. Everything in it is read from the run's ledger through `agent.climb` and `agent.reading`, so it shows the
same figures as `nearpeak history`. `replay --plot F.svg` writes that same SVG; `.png` and `.pdf` need
matplotlib (the optional `plot` extra).
"""
from __future__ import annotations

import html
import shlex
from pathlib import Path
from typing import BinaryIO

from .climb import Climb, ClimbPoint, climb
from .climb_svg import climb_svg, point_label
from .ledger import Ledger
from .loop import ACCEPTED
from .reading import (
    HistoryRow,
    best_kernel,
    find_step,
    history,
    kernel_diff,
    run_config,
    table_columns,
    table_legend,
    with_proposal_columns,
)

PLOT_EXTRA = "pip install 'nearpeak[plot]'"
SVG = "svg"
REPORT_NAME = "report.html"   # `nearpeak report RUN` without -o: inside the run's folder (kept out of its git)


def plot_available() -> bool:
    """Whether matplotlib (the optional `plot` extra) is installed."""
    try:
        import matplotlib  # noqa: F401 - only checking that it is there
    except ImportError:
        return False
    return True


def needs_matplotlib(path: Path) -> bool:
    """Whether writing the plot to `path` takes matplotlib (every format but SVG)."""
    return path.suffix.lower().lstrip(".") != SVG


def describe(c: Climb) -> str:
    """Target, shape, device and date in one line."""
    shape = c.problem or ("x".join(str(n) for n in c.shape) if c.shape else "shape not recorded")
    return f"{c.target}, {shape}, {c.device}, {c.date}"


def plot_title(c: Climb) -> str:
    """The plot's two title lines: the run, then what it ran on and whether its figures are measured."""
    how = ("measured: interleaved A/B speedups, chained" if c.measured
           else "static estimate: no GPU run, not a measurement")
    return f"nearpeak run {c.run_id}\n{describe(c)} - {how}"


def draw(c: Climb, output: Path | BinaryIO, fmt: str | None = None) -> None:
    """Write the climb's plot to `output` (the format from `fmt` or the file's suffix): SVG drawn here, any
    other format through matplotlib."""
    fmt = (fmt or Path(getattr(output, "name", str(output))).suffix.lstrip(".")).lower()
    if fmt == SVG:
        data = climb_svg(c, plot_title(c)).encode()
        if isinstance(output, Path):
            output.write_bytes(data)
        else:
            output.write(data)
        return
    import matplotlib.pyplot as plt

    fig = climb_figure(c)
    fig.savefig(output, format=fmt or None, dpi=120)
    plt.close(fig)


def climb_figure(c: Climb):
    """The climb as a matplotlib figure: the incumbent as a step function (flat through steps that accepted
    nothing), accepted kernels with error bars and `step.candidate idea` labels, rejected candidates, the vendor
    level; the title names the run, shape, device, date and whether it is measured."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(9, 5.2))
    corners = c.incumbent_line()
    if corners:
        ax.plot([s for s, _ in corners], [v for _, v in corners], "-", color="tab:blue", linewidth=2,
                label="incumbent (best so far): " + ("cumulative speedup, 95% CI" if c.measured
                                                     else "static estimate"))
    kept = [p for p in c.accepted if p.cumulative is not None]
    if kept:
        ax.errorbar([p.step for p in kept], [p.cumulative.value for p in kept], yerr=_error_bars(kept), fmt="o",
                    color="tab:blue", capsize=4)
    lineages = [p for p in c.other_lineages if p.cumulative is not None]
    if lineages:
        ax.errorbar([p.step + 0.06 * (p.candidate - 1) for p in lineages], [p.cumulative.value for p in lineages],
                    yerr=_error_bars(lineages), fmt="o", mfc="none", color="tab:blue", capsize=2,
                    label="accepted in another lineage (beam search)")
    others = [p for p in c.points if not p.on_main and p.verdict != ACCEPTED and p.cumulative is not None]
    if others:
        ax.errorbar([p.step + 0.06 * (p.candidate - 1) for p in others], [p.cumulative.value for p in others],
                    yerr=_error_bars(others), fmt="x", color="tab:red", capsize=2, alpha=0.8,
                    label="rejected / not chosen (where it would have landed)")
    for p in kept + lineages + others:
        ax.annotate(point_label(p), (p.step, p.cumulative.value), textcoords="offset points",
                    xytext=(6, 6 if p.verdict != "rejected" else -14), fontsize=7,
                    color="black" if p.on_main else "dimgray")
    screened = sum(1 for p in c.points if not p.on_main and p.cumulative is None)
    if screened:
        ax.plot([], [], " ", label=f"{screened} candidate(s) screened out or not timed (not drawn)")
    _vendor_level(ax, c, kept)
    ax.margins(y=0.12)   # room for the labels above and below the markers
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("step")
    ax.set_ylabel("speedup over the starting kernel (x)" if c.measured
                  else "estimated TFLOP/s over the starting kernel (x, static estimate)")
    ax.set_title(plot_title(c), fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig


def _error_bars(points: list[ClimbPoint]) -> list[list[float]]:
    return [[p.cumulative.value - p.cumulative.low for p in points],
            [p.cumulative.high - p.cumulative.value for p in points]]


def _vendor_level(ax, c: Climb, kept: list[ClimbPoint]) -> None:
    """Mark where the vendor library stands (vendor = 1.0 on the right-hand axis), from the latest session."""
    timed = [p for p in kept if p.vs_vendor is not None and p.cumulative is not None]
    if not c.measured or not timed:
        return
    for p in timed:
        ax.annotate(f"{p.vs_vendor.value:.2f}x vendor", (p.step, p.cumulative.value), textcoords="offset points",
                    xytext=(6, -12), fontsize=7, color="gray")
    last = timed[-1]
    level = last.cumulative.value / last.vs_vendor.value
    ax.axhline(level, linestyle="--", color="gray",
               label=f"{c.vendor or 'vendor library'} = 1.0 (step {last.step}: {last.vendor_source})")
    right = ax.secondary_yaxis("right", functions=(lambda y: y / level, lambda v: v * level))
    right.set_ylabel(f"relative to {c.vendor or 'the vendor library'}")


# -- the HTML report ---------------------------------------------------------------------------------------

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }
tr.accepted, tr.baseline { background: #eef6ee; }
pre { background: #f6f6f6; padding: 0.6em; overflow-x: auto; font-size: 0.8em; }
.add { color: #080; } .del { color: #a00; } .note { color: #666; }
"""


def html_report(ledger: Ledger) -> str:
    """The whole report as one self-contained HTML page."""
    c = climb(ledger)
    config = run_config(ledger)
    rows = history(ledger)
    final = c.accepted[-1]
    parts = ["<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
             f"<title>nearpeak run {_e(c.run_id)}</title><style>{STYLE}</style></head><body>",
             f"<h1>nearpeak run {_e(c.run_id)}</h1>",
             "<table class=\"summary\">",
             _pair("target, shape, device, date", describe(c)),
             _pair("proposer", config.proposer),
             _pair("accept rule", config.objective),
             _pair("accepted steps", str(len(c.accepted) - 1)),
             _pair("speedup over the starting kernel" if c.measured else "estimated TFLOP/s over the start",
                   (final.cumulative.text() if final.cumulative else "n/a")
                   + (" (measured, 95% CI)" if c.measured else " (static estimate, not measured)")),
             ]
    if final.vs_vendor is not None:
        parts.append(_pair(f"final step against {c.vendor or 'the vendor library'}",
                           f"{final.vs_vendor.text()} (measured, {final.vendor_source})"))
    best = best_kernel(ledger)
    parts.append(_pair("best kernel", f"step {best.label}, {best.title}: {best.figure}"))
    parts.append(_pair("its file", f"nearpeak show {shlex.quote(str(ledger.path))} {best.label} --kernel > best.py"))
    parts.append("</table>")
    parts.append("<h2>The climb</h2>")
    parts.append(f"<figure>{climb_svg(c, plot_title(c))}<figcaption class=\"note\">{_e(c.figure)}; the line is "
                 "the incumbent, flat through the steps that accepted nothing; hover a point for its figures."
                 "</figcaption></figure>")
    parts.append("<h2>History</h2>")
    parts.append(_history_table(rows))
    parts.append(f"<p class=\"note\">{_e(table_legend(config.target))}</p>")
    parts.append("<h2>Accepted steps</h2>")
    for point in c.accepted[1:]:
        parts.append(_step_section(ledger, point))
    if len(c.accepted) == 1:
        parts.append("<p>No step was accepted.</p>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _pair(key: str, value: str) -> str:
    return f"<tr><th>{_e(key)}</th><td>{_e(value)}</td></tr>"


def _history_table(rows: list[HistoryRow]) -> str:
    """The history as `nearpeak history` shows it (the same columns and formatting), with each kernel's title."""
    header, cells = with_proposal_columns(rows, *table_columns(rows))
    head = "".join(f"<th>{_e(name)}</th>" for name in (*header[:1], "title", *header[1:]))
    body = []
    for r, line in zip(rows, cells):
        values = (line[0], r.summary.split(" - ", 1)[-1], *line[1:])
        body.append(f"<tr class=\"{_e(r.verdict)}\">" + "".join(f"<td>{_e(v)}</td>" for v in values) + "</tr>")
    return f"<table class=\"history\"><thead><tr>{head}</tr></thead><tbody>\n" + "\n".join(body) + \
        "\n</tbody></table>"


def _step_section(ledger: Ledger, point: ClimbPoint) -> str:
    entry = find_step(ledger, str(point.step))
    figures = [f"speedup over its incumbent: {point.speedup.text() if point.speedup else 'n/a'}",
               f"over the starting kernel: {point.cumulative.text() if point.cumulative else 'n/a'}"]
    if point.vs_vendor is not None:
        figures.append(f"against the vendor: {point.vs_vendor.text()} ({point.vendor_source})")
    lines = []
    for line in (kernel_diff(ledger, entry) or "(kernel unchanged)\n").splitlines():
        cls = "add" if line.startswith("+") and not line.startswith("+++") else \
            "del" if line.startswith("-") and not line.startswith("---") else ""
        lines.append(f"<span class=\"{cls}\">{_e(line)}</span>" if cls else _e(line))
    return (f"<section class=\"step\" id=\"step-{point.step}\"><h3>step {point.step}: {_e(point.title)}</h3>"
            f"<p>{_e('; '.join(figures))}</p><p class=\"note\">{_e(entry.trailers.get('Reason', ''))}</p>"
            f"<pre>{chr(10).join(lines)}</pre></section>")
