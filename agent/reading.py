"""Reading a run back from its ledger: history rows, one step in detail, replay with verification.

Nothing here needs the run's process or any state outside the ledger.
"""
from __future__ import annotations

import difflib
import json
import re
import shlex
import tempfile
import textwrap
from dataclasses import asdict, dataclass
from pathlib import Path

from evaluator.targets import get_target

from .climb import Climb, ClimbPoint, Ratio, climb
from .config import RunConfig
from .evaluation import STATIC, Evaluator
from .figures import STATIC_KEYS, TRAILER_LIMIT
from .ledger import MAIN, Entry, Ledger
from .loop import KERNEL, RECORD, RUN, STEP
from .progress import QUIET, Progress

RUNTIME_NOISE = 0.05   # relative drift of measured TFLOPS tolerated between two runs on one GPU model
MEASURED_FIGURE = "TFLOP/s (measured)"
STATIC_FIGURE = "TFLOP/s (static est.)"   # a static run's objective (estimated_tflops), never a measurement


@dataclass(frozen=True)
class HistoryRow:
    step: int
    candidate: int
    verdict: str
    ref: str
    commit: str
    parent: str                 # the parent's step.candidate ("" for the root)
    summary: str
    reason: str
    proposer: str
    tflops_measured: str
    efficiency_estimate: str
    registers: str
    spills: str
    shared: str
    tokens: str
    objective: str = ""      # the accept rule that judged it: "measured" or "static" (agent.evaluation)
    tflops_estimate: str = ""  # the static objective: estimated useful TFLOP/s (never a measurement)
    speedup: str = ""        # over the incumbent it was judged against (agent.climb)
    cumulative: str = ""     # over the starting kernel, chained over the accepted steps
    vs_vendor: str = ""      # vendor time / its time, measured interleaved
    idea: str = ""           # the planned idea it implements: "2 - title" (agent.ideas)
    duplicate_of: str = ""   # the step.candidate whose source or compiled kernels it repeats (not evaluated again)
    tokens_prompt: str = ""      # llm: prompt tokens over its requests, as the endpoint counted them
    tokens_completion: str = ""  # llm: completion tokens, likewise
    tokens_estimate: str = ""    # manual: estimated from characters, never a count


def _label(entry: Entry) -> str:
    return f"{entry.step}.{entry.candidate}"


def history(ledger: Ledger) -> list[HistoryRow]:
    rows = []
    run = climb(ledger)
    entries = ledger.entries()
    labels = {e.sha: _label(e) for e in entries}
    for e in entries:
        t = e.trailers
        point = run.point(e.sha)
        rows.append(HistoryRow(step=e.step, candidate=e.candidate, verdict=e.verdict, ref=e.ref, commit=e.sha,
                               parent=labels.get(e.parent, e.parent[:12]) if e.parent else "",
                               summary=e.summary, reason=_reason(ledger, e), proposer=t.get("Proposer", ""),
                               tflops_measured=_tflops(t.get("TFLOPS-Measured", "n/a"), point, run),
                               efficiency_estimate=t.get("Efficiency-Estimate", "n/a"),
                               registers=t.get("Registers", "n/a"), spills=t.get("Spills", "n/a"),
                               shared=t.get("Shared", "n/a"), tokens=t.get("Tokens", ""),
                               objective=t.get("Objective", ""), tflops_estimate=t.get("TFLOPS-Estimate", "n/a"),
                               speedup=_ratio(point.speedup if point else None, run),
                               cumulative=_ratio(point.cumulative if point else None, run),
                               vs_vendor=_ratio(point.vs_vendor if point else None, run),
                               idea=t.get("Idea", ""), duplicate_of=t.get("Duplicate-Of", ""),
                               tokens_prompt=t.get("Tokens-Prompt", ""), tokens_completion=t.get("Tokens-Completion", ""),
                               tokens_estimate=t.get("Tokens-Estimate", "").split(" (")[0]))
    return rows


def _reason(ledger: Ledger, entry: Entry) -> str:
    """The verdict's reason: the trailer, or step.json's whole text when the trailer had to be cut."""
    reason = entry.trailers.get("Reason", "")
    if len(reason) < TRAILER_LIMIT:
        return reason
    whole = json.loads(ledger.read(entry.sha, STEP) or b"{}").get("reason")
    return " ".join(str(whole).split()) if whole else reason


def _tflops(text: str, point: ClimbPoint | None, run: Climb) -> str:
    """The trailer's measured TFLOP/s, naming its shape when that is not the shape the climb compared."""
    if point is None or point.timed_shape is None or point.timed_shape == run.shape:
        return text
    return text.split(" (")[0] + " @" + "x".join(str(n) for n in point.timed_shape)


def _ratio(ratio: Ratio | None, run: Climb) -> str:
    if ratio is None:
        return "n/a"
    if ratio.low == ratio.high:
        return f"{ratio.value:.3f}" + ("" if run.measured else " est.")
    return f"{ratio.value:.3f} [{ratio.low:.3f},{ratio.high:.3f}]"


def run_config(ledger: Ledger) -> RunConfig:
    """The configuration the run was created with (run.json of its root commit)."""
    return RunConfig.from_json(ledger.read(ledger.main_line()[0].sha, RUN))


def history_json(ledger: Ledger) -> dict:
    """A run's configuration, every entry, and where its best kernel is (`best_kernel`)."""
    return {"run": asdict(run_config(ledger)), "path": str(ledger.path),
            "entries": [asdict(r) for r in history(ledger)], "best": asdict(best_kernel(ledger))}


REASON_WIDTH = 60   # the reason column wraps at this width: shown whole, never cut


def judged_statically(rows: list[HistoryRow]) -> bool:
    """Whether the run behind `rows` is a static-mode run: judged by its static estimate, with no GPU timing."""
    return bool(rows) and all(r.objective == STATIC for r in rows)


def fixed(text: str, digits: int) -> str:
    """The number that `text` starts with, to `digits` decimals (the rest of `text` kept); other text as it is."""
    match = re.match(r"-?\d+(\.\d+)?(e[-+]?\d+)?", text)
    if not match:
        return text
    return f"{float(match.group()):.{digits}f}" + text[match.end():]


def percent(text: str) -> str:
    """A fraction written as a trailer ("0.2349") as a percentage ("23.5%")."""
    try:
        return f"{100 * float(text):.1f}%"
    except ValueError:
        return text


def kib(text: str) -> str:
    """A byte count written as a trailer ("65536 bytes") in KiB ("64.0")."""
    try:
        return f"{int(text.split()[0]) / 1024:.1f}"
    except (ValueError, IndexError):
        return text


def table_columns(rows: list[HistoryRow]) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """The history table's header and cells, units in the header, numbers formatted alike (text and HTML)."""
    static = judged_statically(rows)
    header = ("step", "parent", "verdict", "x incumbent", "x start", "vs vendor",
              STATIC_FIGURE if static else MEASURED_FIGURE, "eff (static est.)", "regs", "spills", "shared KiB",
              "reason")
    body = [(f"{r.step}.{r.candidate}", r.parent, r.verdict, r.speedup, r.cumulative, r.vs_vendor,
             fixed(r.tflops_estimate if static else r.tflops_measured.split(" (")[0], 1),
             percent(r.efficiency_estimate), r.registers, r.spills, kib(r.shared), r.reason) for r in rows]
    return header, body


def table_legend(target: str) -> str:
    """The lines under a history table: what its ratios are, and what its register and spill columns count on
    the run's target."""
    return ("x incumbent: over the kernel it was judged against; x start: over the starting kernel; est. = static "
            f"estimate.\n{get_target(target).toolchain.history_legend}; shared KiB = shared memory (LDS) per CTA. "
            "A step's whole evaluation: nearpeak show RUN STEP.")


def format_table(rows: list[HistoryRow]) -> str:
    """History rows as a text table; `x incumbent` (over the parent it was judged against) and `x start` are the
    climb's ratios (agent.climb). The TFLOP/s column is what the run judged by: measured on a GPU, or in a
    static run the estimated TFLOP/s, labelled a static estimate. The reason, last, wraps onto further lines
    under its own column rather than being cut."""
    header, body = with_proposal_columns(rows, *table_columns(rows))
    widths = [max(len(str(x)) for x in col) for col in zip(header, *body)]
    widths[-1] = min(widths[-1], REASON_WIDTH)
    indent = sum(w + 2 for w in widths[:-1])
    lines = []
    for line in (header, *body):
        reason = textwrap.wrap(line[-1], REASON_WIDTH, break_long_words=False, break_on_hyphens=False) or [""]
        lines.append("  ".join(str(v).ljust(w) for v, w in zip((*line[:-1], reason[0]), widths)).rstrip())
        lines += [" " * indent + more for more in reason[1:]]
    return "\n".join(lines)


IDEA_WIDTH = 28


def with_proposal_columns(rows: list[HistoryRow], header: tuple, body: list[tuple]) -> tuple[tuple, list[tuple]]:
    """The idea, duplicate and token columns, before the reason, for runs that have any of them."""
    extra = []
    if any(r.idea for r in rows):
        extra.append(("idea", [shorten(r.idea.replace(" - ", " ", 1), IDEA_WIDTH) for r in rows]))
    if any(r.duplicate_of for r in rows):
        extra.append(("dup of", [r.duplicate_of for r in rows]))
    if any(r.tokens_prompt or r.tokens_estimate for r in rows):
        extra.append(("tokens in+out", [f"{r.tokens_prompt}+{r.tokens_completion}" if r.tokens_prompt else
                                        (f"~{r.tokens_estimate} est." if r.tokens_estimate else "") for r in rows]))
    if not extra:
        return header, body
    names = tuple(name for name, _ in extra)
    cells = [tuple(column[i] for _, column in extra) for i in range(len(rows))]
    return header[:-1] + names + header[-1:], [line[:-1] + cell + line[-1:] for line, cell in zip(body, cells)]


def shorten(text: str, width: int) -> str:
    """`text` cut to at most `width` characters at a word boundary, with an ellipsis when cut."""
    if len(text) <= width:
        return text
    cut = text[:width - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut).rstrip(" ,;:") + "…"


def tree(ledger: Ledger) -> str:
    """The accepted kernels as the search tree they form, each under its parent; `*` marks main's lineage.

    Rejected and passed attempts are left out (the table lists them with their parents).
    """
    main = {e.sha for e in ledger.main_line()}
    accepted = [e for e in ledger.entries() if e.verdict in ("accepted", "baseline")]
    children: dict[str | None, list[Entry]] = {}
    for e in accepted:
        children.setdefault(e.parent, []).append(e)
    lines: list[str] = []

    def walk(entry: Entry, prefix: str, last: bool, root: bool) -> None:
        t = entry.trailers
        figure = t.get("TFLOPS-Measured", "n/a").split(" (")[0]
        if figure != "n/a":
            figure = f"{fixed(figure, 1)} TFLOP/s"
        elif "TFLOPS-Estimate" in t:
            figure = f"{fixed(t['TFLOPS-Estimate'], 1)} TFLOP/s (static est.)"
        else:
            figure = f"eff {percent(t.get('Efficiency-Estimate', 'n/a'))} (static est.)"
        where = "*" if entry.sha in main else entry.ref.removeprefix("refs/")
        branch = "" if root else ("└─ " if last else "├─ ")
        lines.append(f"{prefix}{branch}{_label(entry)} {figure} {where}  {entry.summary.split(' - ', 1)[-1]}")
        kids = children.get(entry.sha, [])
        for i, kid in enumerate(kids):
            walk(kid, prefix if root else prefix + ("   " if last else "│  "), i == len(kids) - 1, False)

    for root in children.get(None, []):
        walk(root, "", True, True)
    return "\n".join(lines)


def find_step(ledger: Ledger, spec: str) -> Entry:
    """`3` is step 3's accepted commit (or its only attempt); `3.2` or `3-2` is candidate 2 of step 3."""
    text = spec.replace("-", ".")
    try:
        parts = [int(p) for p in text.split(".")]
    except ValueError:
        raise LookupError(f"step must look like 3 or 3.2, got {spec!r}") from None
    every = ledger.entries()
    entries = [e for e in every if e.step == parts[0]]
    if len(parts) == 2:
        entries = [e for e in entries if e.candidate == parts[1]]
    if not entries:
        raise LookupError(f"the run has no step {spec}; {_what_there_is(every, parts[0])}")
    on_main = [e for e in entries if e.ref == MAIN]
    if on_main:
        return on_main[0]
    accepted = [e for e in entries if e.verdict == "accepted"]
    if len(accepted) == 1:
        return accepted[0]
    if len(entries) > 1:
        listing = ", ".join(f"{e.step}.{e.candidate} ({e.verdict})" for e in entries)
        raise LookupError(f"step {spec} accepted nothing; pick one of its candidates: {listing}")
    return entries[0]


def _what_there_is(entries: list[Entry], step: int) -> str:
    """The steps (or the candidates of `step`) a run has, for a message about one it does not have."""
    same = [_label(e) for e in entries if e.step == step]
    if same:
        return f"step {step} has candidate(s) {', '.join(same)}"
    steps = sorted({e.step for e in entries})
    if steps == list(range(steps[0], steps[-1] + 1)) and len(steps) > 2:
        return f"its steps are {steps[0]} to {steps[-1]}"
    return f"its steps are {', '.join(map(str, steps))}"


def kernel_source(ledger: Ledger, spec: str) -> str:
    """The kernel file of one step or candidate (`find_step`'s spec), as committed."""
    return (ledger.read(find_step(ledger, spec).sha, KERNEL) or b"").decode()


def kernel_diff(ledger: Ledger, entry: Entry) -> str:
    """The unified diff of `entry`'s kernel against its parent's (the incumbent it was judged against)."""
    new = (ledger.read(entry.sha, KERNEL) or b"").decode()
    old = (ledger.read(entry.parent, KERNEL) or b"").decode() if entry.parent else ""
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        f"a/{KERNEL} (parent {entry.parent[:12] if entry.parent else 'none'})",
                                        f"b/{KERNEL} ({entry.sha[:12]})"))


def show(ledger: Ledger, spec: str) -> str:
    entry = find_step(ledger, spec)
    diff = kernel_diff(ledger, entry)
    record = json.loads(ledger.read(entry.sha, RECORD) or b"{}")
    static = record.get("static") or {}
    evaluation = {"status": record.get("status"), "message": record.get("message"), "line": record.get("line"),
                  "static": {k: static.get(k) for k in STATIC_KEYS + ("estimate",) if k in static}}
    if record.get("runtime"):
        evaluation["runtime (measured)"] = record["runtime"]
    step = json.loads(ledger.read(entry.sha, STEP) or b"{}")
    if step.get("comparison"):
        evaluation["comparison (measured)"] = step["comparison"]
    return (f"commit {entry.sha} ({entry.ref})\n\n{entry.message.rstrip()}\n\n"
            f"--- diff against the incumbent ---\n{diff or '(kernel unchanged)'}\n"
            f"--- evaluation ---\n{json.dumps(evaluation, indent=1, default=str)}\n")


@dataclass(frozen=True)
class Drift:
    step: int
    commit: str
    problems: tuple[str, ...]        # figures that did not reproduce
    notes: tuple[str, ...] = ()      # what could not be re-checked here


def lineage(ledger: Ledger, spec: str | None = None) -> list[Entry]:
    """The kernels from the root to `spec` (a step as `find_step` reads it; None: main's head), oldest first."""
    if spec is None:
        return ledger.main_line()
    tip = find_step(ledger, spec)
    entries = {e.sha: e for e in ledger.entries()}
    return [entries[sha] for sha in ledger.first_parent_chain(tip.sha)]  # every ancestor is an accepted kernel


def verify(ledger: Ledger, evaluator: Evaluator, progress: Progress = QUIET, spec: str | None = None) -> list[Drift]:
    """Re-evaluate each kernel of a lineage (default main's); static figures must match exactly, runtime ones
    within noise."""
    drifts = []
    entries = lineage(ledger, spec)
    with tempfile.TemporaryDirectory(prefix="nearpeak-replay-") as tmp:
        for index, entry in enumerate(entries, start=1):
            path = Path(tmp) / f"step{entry.step:03d}-{entry.candidate}" / KERNEL
            path.parent.mkdir(parents=True)
            path.write_bytes(ledger.read(entry.sha, KERNEL))
            old = json.loads(ledger.read(entry.sha, RECORD))
            with progress.task(f"[{index}/{len(entries)}] re-evaluating step {entry.step} ({entry.sha[:12]})"):
                new = evaluator.record(path, run=None if old.get("runtime") else False)
            problems, notes = compare_records(old, new)
            drifts.append(Drift(entry.step, entry.sha, tuple(problems), tuple(notes)))
    return drifts


def compare_records(old: dict, new: dict) -> tuple[list[str], list[str]]:
    """(drift problems, notes) between a ledger record and a fresh one of the same kernel."""
    problems, notes = [], []
    if old.get("status") != new.get("status"):
        problems.append(f"status {old.get('status')} -> {new.get('status')}")
    if old.get("triton_version") != new.get("triton_version"):
        problems.append(f"triton {old.get('triton_version')} -> {new.get('triton_version')} (figures may differ)")
    s_old, s_new = old.get("static") or {}, new.get("static") or {}
    for key in STATIC_KEYS:
        if s_old.get(key) != s_new.get(key):
            problems.append(f"static {key}: {s_old.get(key)} -> {s_new.get(key)}")
    r_old, r_new = old.get("runtime") or {}, new.get("runtime") or {}
    if r_old.get("tflops") and r_new.get("tflops"):
        drift = r_new["tflops"] / r_old["tflops"] - 1.0
        if abs(drift) > RUNTIME_NOISE:
            problems.append(f"measured TFLOPS {r_old['tflops']:.1f} -> {r_new['tflops']:.1f} ({drift:+.1%}, "
                            f"beyond the {RUNTIME_NOISE:.0%} noise allowance)")
    elif r_old.get("tflops") and not r_new:
        notes.append("measured on a GPU that is not here: runtime figures not re-checked")
    return problems, notes


@dataclass(frozen=True)
class BestKernel:
    """Where a run's result is: main's head, its figure, and how to get its file out."""

    label: str          # step.candidate
    commit: str
    title: str
    figure: str         # its TFLOP/s, labelled measured or static estimate
    over_start: str     # its ratio over the starting kernel, labelled likewise ("" when it has none)
    is_start: bool      # no step was accepted: the best kernel is the starting one


def best_kernel(ledger: Ledger) -> BestKernel:
    """The run's best kernel (main's head) with its headline figures."""
    head = ledger.main_line()[-1]
    run = climb(ledger)
    point = run.point(head.sha)
    t = head.trailers
    measured = t.get("TFLOPS-Measured", "n/a").split(" (")[0]
    if measured != "n/a":
        figure = f"{fixed(measured, 1)} TFLOP/s measured on {t.get('Device', 'its GPU')}"
    elif t.get("TFLOPS-Estimate", "n/a") != "n/a":
        figure = f"{fixed(t['TFLOPS-Estimate'], 1)} TFLOP/s (static estimate)"
    else:
        figure = f"efficiency {percent(t.get('Efficiency-Estimate', 'n/a'))} (static estimate)"
    ratio = point.cumulative if point else None
    how = "measured, 95% CI" if run.measured else "static estimate"
    over = "" if ratio is None else f"{ratio.text()} the starting kernel ({how})"
    return BestKernel(label=_label(head), commit=head.sha, title=point.title if point else head.summary,
                      figure=figure, over_start=over, is_start=head.step == 0)


def where_the_result_is(ledger: Ledger) -> str:
    """The lines that end a run's output: the best kernel, how to get its file, and what to run next."""
    best = best_kernel(ledger)
    run = shlex.quote(str(ledger.path))
    if best.is_start:
        lines = [f"best kernel: the starting kernel (step 0; no step was accepted): {best.figure}"]
    else:
        figures = ", ".join(filter(None, (best.figure, best.over_start)))
        lines = [f"best kernel: step {best.label}, {best.title}: {figures}"]
    commands = [
        ("get the file", f"nearpeak show {run} {best.label} --kernel > best.py", ""),
        ("", f"git -C {run} show main:kernel.py", "the same file, read from the run's git ledger"),
        ("next", f"nearpeak history {run}", "every step and attempt, and the search tree"),
        ("", f"nearpeak show {run} STEP", "one step's diff against its incumbent, and its whole evaluation"),
        ("", f"nearpeak report {run}", "an HTML page in the run's folder: climb plot, history, diffs"),
    ]
    width = max(len(command) for _, command, _ in commands)
    lines += [f"  {name + ':' if name else '':<14} {command:<{width}}  {note}".rstrip()
              for name, command, note in commands]
    return "\n".join(lines)
