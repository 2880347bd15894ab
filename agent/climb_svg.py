"""The climb plot as an SVG document, drawn with no plotting library (the HTML report inlines it).

It shows what the matplotlib plot of agent.report shows: the incumbent's ratio over the starting kernel as a
step function (flat through the steps that accepted nothing), each accepted kernel of main's lineage with its
95% interval and a `step.candidate idea` label, other lineages' kernels, rejected candidates where they would
have landed, and in a measured run where the vendor library stands. Every point also carries a tooltip with
its figures. Pure: a Climb in, text out.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

from .climb import Climb, ClimbPoint, Ratio
from .reading import shorten

WIDTH, HEIGHT = 920, 500
LEFT, RIGHT, TOP, BOTTOM = 72, 24, 62, 56
BLUE, RED, GRAY = "#1f77b4", "#d62728", "#666666"
LABEL_CHARS = 36
CHAR_WIDTH = 6.0   # about one character of the 10 px labels, to keep them inside the frame


def point_label(p: ClimbPoint) -> str:
    """`step.candidate` and the idea it implements (or its title), short enough to sit beside a marker (cut at a
    word with an ellipsis; the point's tooltip has it whole)."""
    return shorten(f"{p.label} {p.idea or p.title}".strip(), LABEL_CHARS)


@dataclass(frozen=True)
class _Frame:
    """Data coordinates to pixels."""

    x_low: float
    x_high: float
    y_low: float
    y_high: float

    def x(self, step: float) -> float:
        return LEFT + (step - self.x_low) / (self.x_high - self.x_low) * (WIDTH - LEFT - RIGHT)

    def y(self, value: float) -> float:
        return HEIGHT - BOTTOM - (value - self.y_low) / (self.y_high - self.y_low) * (HEIGHT - TOP - BOTTOM)


def _ticks(low: float, high: float, count: int = 6) -> list[float]:
    """Round tick values covering [low, high]."""
    raw = (high - low) / max(count - 1, 1)
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step) * step
    return [round(first + i * step, 10) for i in range(int((high - first) / step + 1e-9) + 1)]


def _vendor_level(c: Climb) -> tuple[float, ClimbPoint] | None:
    """Where the vendor library sits on the plot's scale (from the latest accepted step timed against it)."""
    timed = [p for p in c.accepted if p.vs_vendor is not None and p.cumulative is not None]
    if not c.measured or not timed:
        return None
    last = timed[-1]
    return last.cumulative.value / last.vs_vendor.value, last


def _tooltip(p: ClimbPoint, c: Climb) -> str:
    how = "measured" if c.measured else "static estimate"
    parts = [f"step {p.label} ({p.verdict}): {p.title}"]
    if p.idea:
        parts.append(f"idea: {p.idea}")
    if p.speedup is not None:
        parts.append(f"x incumbent {p.speedup.text()} ({how})")
    if p.cumulative is not None:
        parts.append(f"x start {p.cumulative.text()} ({how})")
    if p.vs_vendor is not None:
        parts.append(f"vs {c.vendor or 'vendor'} {p.vs_vendor.text()} (measured)")
    return "\n".join(parts)


def climb_svg(c: Climb, title: str) -> str:
    """The climb of `c` as one `<svg>` element (no external references), `title` on top."""
    drawn = [p for p in c.points if p.cumulative is not None]
    vendor = _vendor_level(c)
    values = [v for p in drawn for v in (p.cumulative.low, p.cumulative.high)] + [1.0]
    if vendor:
        values.append(vendor[0])
    low, high = min(values), max(values)
    pad = (high - low) * 0.1 or 0.1
    last = max((p.step for p in c.points), default=0)
    frame = _Frame(-0.5, last + 0.5, low - pad, high + pad)
    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11" role="img">'),
           f"<title>{escape(c.figure)}</title>",
           '<rect width="100%" height="100%" fill="white"/>']
    for i, line in enumerate(title.splitlines()):
        out.append(_text(WIDTH / 2, 20 + 15 * i, line, anchor="middle", size=12 if i == 0 else 11))
    out += _axes(c, frame, last)
    if vendor:
        level, source = vendor
        y = frame.y(level)
        out.append(f'<line class="vendor" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
                   f'stroke="{GRAY}" stroke-dasharray="6 4"/>')
        out.append(_text(WIDTH - RIGHT - 4, y - 5, f"{c.vendor or 'vendor library'} = 1.0 (step {source.label}: "
                                                   f"{source.vendor_source})", anchor="end", color=GRAY))
    corners = c.incumbent_line()
    if corners:
        path = " ".join(f"{frame.x(s):.1f},{frame.y(v):.1f}" for s, v in corners)
        out.append(f'<polyline class="incumbent" points="{path}" fill="none" stroke="{BLUE}" stroke-width="2"/>')
    for p in drawn:
        out.append(_marker(p, c, frame))
    out += _legend(c, drawn)
    out.append("</svg>")
    return "\n".join(out)


def _axes(c: Climb, frame: _Frame, last: int) -> list[str]:
    bottom, right = HEIGHT - BOTTOM, WIDTH - RIGHT
    out = [f'<rect x="{LEFT}" y="{TOP}" width="{right - LEFT}" height="{bottom - TOP}" fill="none" stroke="#333"/>']
    ticks = _ticks(frame.y_low, frame.y_high)
    spacing = ticks[1] - ticks[0] if len(ticks) > 1 else 0.01
    digits = next(d for d in range(7) if abs(round(spacing, d) - spacing) < 1e-9 or d == 6)
    for value in ticks:
        y = frame.y(value)
        out.append(f'<line x1="{LEFT}" x2="{right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(_text(LEFT - 6, y + 4, f"{value:.{digits}f}", anchor="end"))
    stride = max(1, math.ceil((last + 1) / 20))
    for step in range(0, last + 1, stride):
        x = frame.x(step)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{bottom}" y2="{bottom + 4}" stroke="#333"/>')
        out.append(_text(x, bottom + 16, str(step), anchor="middle"))
    out.append(_text((LEFT + right) / 2, HEIGHT - 14, "step", anchor="middle"))
    ylabel = ("speedup over the starting kernel (x, measured)" if c.measured
              else "estimated TFLOP/s over the starting kernel (x, static estimate)")
    out.append(f'<text x="16" y="{(TOP + bottom) / 2:.1f}" transform="rotate(-90 16 {(TOP + bottom) / 2:.1f})" '
               f'text-anchor="middle">{escape(ylabel)}</text>')
    return out


def _marker(p: ClimbPoint, c: Climb, frame: _Frame) -> str:
    main = p.on_main
    accepted = main or p.verdict == "accepted"
    offset = 0 if main else 0.08 * max(p.candidate - 1, 0)
    x, y = frame.x(p.step + offset), frame.y(p.cumulative.value)
    color = BLUE if accepted else RED
    parts = [f'<g class="point {"main" if main else "accepted" if accepted else "rejected"}">',
             f"<title>{escape(_tooltip(p, c))}</title>"]
    parts += _error_bar(x, p.cumulative, frame, color)
    if main:
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4.5" fill="{color}"/>')
    elif accepted:
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4.5" fill="white" stroke="{color}" stroke-width="1.5"/>')
    else:
        parts.append(f'<path d="M{x - 4:.1f},{y - 4:.1f}L{x + 4:.1f},{y + 4:.1f}M{x - 4:.1f},{y + 4:.1f}'
                     f'L{x + 4:.1f},{y - 4:.1f}" stroke="{color}" stroke-width="1.8"/>')
    label, label_y = point_label(p), y - 9 if accepted else y + 16
    fits = x + 6 + CHAR_WIDTH * len(label) <= WIDTH - RIGHT   # else it ends at the marker, inside the frame
    parts.append(_text(x + 6 if fits else x - 6, label_y, label, anchor="start" if fits else "end",
                       color="#222" if main else GRAY, size=10))
    if main and p.vs_vendor is not None:
        parts.append(_text(x + 6, y + 14, f"{p.vs_vendor.value:.2f}x vendor", color=GRAY, size=9))
    parts.append("</g>")
    return "".join(parts)


def _error_bar(x: float, ratio: Ratio, frame: _Frame, color: str) -> list[str]:
    if ratio.low == ratio.high:
        return []
    top, bottom = frame.y(ratio.high), frame.y(ratio.low)
    return [(f'<path d="M{x:.1f},{top:.1f}V{bottom:.1f}M{x - 4:.1f},{top:.1f}H{x + 4:.1f}M{x - 4:.1f},{bottom:.1f}'
            f'H{x + 4:.1f}" stroke="{color}" fill="none"/>')]


def _legend(c: Climb, drawn: list[ClimbPoint]) -> list[str]:
    entries = [(BLUE, "line", "incumbent (best so far): " + ("cumulative speedup, 95% CI" if c.measured
                                                            else "static estimate"))]
    if any(not p.on_main and p.verdict == "accepted" for p in drawn):
        entries.append((BLUE, "ring", "accepted in another lineage (beam search)"))
    if any(not p.on_main and p.verdict != "accepted" for p in drawn):
        entries.append((RED, "cross", "rejected / not chosen (where it would have landed)"))
    screened = sum(1 for p in c.points if not p.on_main and p.cumulative is None)
    if screened:
        entries.append((GRAY, "none", f"{screened} candidate(s) screened out or not timed (not drawn)"))
    out = ['<g class="legend">']
    for i, (color, kind, text) in enumerate(entries):
        x, y = LEFT + 10, TOP + 14 + 15 * i
        if kind == "line":
            out.append(f'<line x1="{x}" x2="{x + 16}" y1="{y - 4}" y2="{y - 4}" stroke="{color}" stroke-width="2"/>')
        elif kind == "ring":
            out.append(f'<circle cx="{x + 8}" cy="{y - 4}" r="4" fill="white" stroke="{color}"/>')
        elif kind == "cross":
            out.append(f'<path d="M{x + 4},{y - 8}L{x + 12},{y}M{x + 4},{y}L{x + 12},{y - 8}" stroke="{color}"/>')
        out.append(_text(x + 22, y, text, size=10))
    out.append("</g>")
    return out


def _text(x: float, y: float, text: str, anchor: str = "start", color: str = "#222", size: int = 11) -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" fill="{color}" font-size="{size}">'
            f"{escape(text)}</text>")
