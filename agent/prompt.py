"""The LLM prompt: what an expert would want on the desk before proposing one better kernel.

Sections, in order: the target's facts and the cost of the kernel's own matrix instructions (from the
target's one cost table); a Gluon API sheet generated from the installed Triton; the reference ladder's
techniques, and how the ladder applied the next one (that stage's docstring and its diff against the
previous stage); the current kernel, with docstring figures that no longer match its evaluation flagged;
the evaluation (shape and grid against the CU/SM count, register split, scratch, occupancy and what limits
it, instruction mix, the static model's bound and what it leaves out when the accept rule is the estimate,
measured figures and host launch time when present); the hot loop, whole or compressed; the last failure;
every earlier attempt with its verdict, figures and compact diff; and the task: the idea this request
implements and those its siblings implement (or, unplanned, which request of the step this is).

A step with K > 1 requests is planned first (agent.ideas): `plan_messages` is the planning request, the
same evidence with the ideas tried earlier in the run and a task that asks for ranked, distinct ideas in
JSON. `section_sizes` measures how much of a prompt each section takes.

Target-specific facts come from the target object and the evaluation record; nothing here names a target.
"""
from __future__ import annotations

import ast
import difflib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from evaluator.targets import get_target

from .edits import format_instructions
from .figures import figures, headline
from .gluon_sheet import api_sheet, installed_triton
from .ideas import Idea, reply_format, tried_section
from .proposers import PlanRequest, ProposalContext
from .proposers.ladder import Stage
from .source import compact_diff, declaration, module_docstring

HISTORY_LIMIT = 30          # attempts listed
HISTORY_DIFFS = 8           # most recent attempts shown with their diff
LADDER_DIFF_LINES = 120
STATIC_MODEL_DOC = Path(__file__).resolve().parents[1] / "docs" / "static-model.md"
LEAVES_OUT = "## What it leaves out"


@dataclass(frozen=True)
class Brief:
    """What the prompt knows besides the step's context: the reference ladder and the run's mode."""

    stages: tuple[Stage, ...] = ()      # the reference ladder of the kernel's target and dtype, in order
    static_objective: bool = True     # the accept rule compares static estimates (no GPU of the target)


@dataclass(frozen=True)
class Slot:
    """Which of the step's concurrent requests this is, and what its siblings already produced."""

    index: int
    total: int
    siblings: tuple[str, ...] = ()
    idea: Idea | None = None                  # the planned idea this request implements
    sibling_ideas: tuple[Idea, ...] = ()      # the ideas the step's other requests implement


# -- target facts ---------------------------------------------------------------------------------------------


def hardware_facts(target_name: str, dtype: str | None) -> str:
    t = get_target(target_name)
    peak = t.peak_tflops.get(dtype or "", None)
    lines = [
        f"- target {t.name} ({', '.join(t.devices)}); backend {t.backend}, arch {t.arch}, warp/wave size {t.warp_size}",
        (f"- {t.compute_units} compute units (CUs/SMs), {t.simds_per_cu} SIMDs or sub-partitions each, "
         f"up to {t.max_waves_per_simd} waves per SIMD, engine clock up to {t.clock_ghz} GHz (datasheet)"),
        (f"- registers: {t.register_file} per {t.register_file_unit}, at most {t.max_registers_per_thread} per "
         f"thread; shared memory / LDS {t.shared_bytes_per_cu // 1024} KiB per CU/SM"),
    ]
    if peak:
        lines.append(f"- datasheet dense peak for {dtype}: {peak} TFLOP/s")
    return "\n".join(lines)


def _operand_class(mnemonic: str) -> str:
    """The operand-type token that ends a matrix mnemonic: f16, bf8, fp4 (after ':'), BF16 ..."""
    return re.split(r"[._:]", mnemonic)[-1].lower()


def _used_matrix_instructions(static: dict) -> list[str]:
    return list(static.get("matrix_shape") or static.get("mfma_shape") or [])


def matrix_facts(target_name: str, record: dict) -> str:
    """Cost of the kernel's own matrix instructions, and the table's other entries for the same operand type."""
    t = get_target(target_name)
    static = record.get("static") or {}
    used = _used_matrix_instructions(static)
    if not used:
        return "- the compiled kernel has no matrix instructions (the static screen found none)"
    table = t.matrix_cycles
    lines = []
    for name in used:
        cycles = table.get(name)
        lines.append(f"- {name}: " + (f"{cycles} cycles of the matrix unit per instruction (cost table)"
                                      if cycles is not None else "not in the cost table"))
    classes = {_operand_class(name) for name in used}
    related = [(k, v) for k, v in table.items() if _operand_class(k) in classes and k not in used]
    if related:
        lines.append("- other entries of the cost table for the same operand type: "
                     + ", ".join(f"{k} {v}" for k, v in related))
    note = t.matrix_cycles_note
    if note and any(name not in table for name in used):
        lines.append(f"- {note}")
    estimate = static.get("estimate") or {}
    loop = static.get("hot_loop") or {}
    if estimate.get("matrix_cycles_per_iteration"):
        lines.append(f"- the hot loop issues {_loop_matrix(loop)} "
                     f"matrix instruction(s) per iteration: {estimate['matrix_cycles_per_iteration']} matrix cycles")
    return "\n".join(lines)


def _loop_matrix(loop: dict):
    counts = [loop.get(k) for k in ("mfma", "wgmma", "mma_sync") if loop.get(k)]
    return sum(counts) if counts else "n/a"


# -- the evaluation -------------------------------------------------------------------------------------------


def _shape_and_grid(target_name: str, record: dict) -> list[str]:
    t = get_target(target_name)
    static = record.get("static") or {}
    lines = []
    shape = record.get("shape")
    if shape:
        m, n, k = shape
        lines.append(f"- evaluated shape M x N x K = {m} x {n} x {k} ({2 * m * n * k / 1e9:.1f} GFLOP per call); "
                     f"knobs {json.dumps(record.get('knobs') or {})}")
        knobs = record.get("knobs") or {}
        if knobs.get("BLOCK_M") and knobs.get("BLOCK_N"):
            tiles = math.ceil(m / knobs["BLOCK_M"]) * math.ceil(n / knobs["BLOCK_N"])
            lines.append(f"- output tiles of {knobs['BLOCK_M']} x {knobs['BLOCK_N']}: {tiles}")
    grid = static.get("grid")
    if grid:
        blocks = math.prod(grid)
        lines.append(f"- launch grid {grid} = {blocks} workgroups/CTAs for {t.compute_units} CUs/SMs "
                     f"({blocks / t.compute_units:.2f} per CU/SM), {static.get('num_warps')} warps/waves each")
    return lines


def _registers_and_occupancy(target_name: str, static: dict) -> list[str]:
    t = get_target(target_name)
    split = [f"{k} {static[k]}" for k in ("arch_vgprs", "agprs", "total_vgprs", "sgprs") if k in static]
    lines = [f"- registers per thread: {', '.join(split) or static.get('registers')}"]
    scratch = [f"{k} {static[k]}" for k in ("scratch_bytes", "stack_frame_bytes", "spill_store_bytes",
                                            "spill_load_bytes", "vgpr_spill_count", "sgpr_spill_count")
               if k in static]
    lines.append(f"- spills / scratch: spills {static.get('spills')}, hot-loop spills {static.get('hot_loop_spills')}"
                 + (f" ({', '.join(scratch)})" if scratch else ""))
    lines.append(f"- shared memory / LDS: {static.get('shared_bytes')} bytes of {t.shared_bytes_per_cu} per CU/SM")
    limits = {k[len("occupancy_limit_"):]: v for k, v in static.items() if k.startswith("occupancy_limit_")}
    if not limits:
        limits = _derived_limits(t, static)
    occupancy = {k: static[k] for k in ("occupancy_waves_per_simd", "occupancy_blocks_per_sm",
                                        "occupancy_warps_per_sm") if k in static} or {"occupancy": static.get(
                                            "occupancy")}
    text = ", ".join(f"{k} {v}" for k, v in occupancy.items())
    if limits:
        low = min(limits.values())
        text += (f"; limited by {' and '.join(k for k, v in limits.items() if v == low)} "
                 f"(limits: {', '.join(f'{k} {v}' for k, v in limits.items())})")
    lines.append(f"- occupancy: {text}")
    return lines


def _derived_limits(t, static: dict) -> dict[str, int]:
    """Blocks per SM allowed by registers and by shared memory, where the register file is counted per SM."""
    limits = {}
    threads = (static.get("num_warps") or 0) * t.warp_size
    if t.register_file_unit == "SM" and static.get("registers") and threads:
        limits["registers"] = t.register_file // (static["registers"] * threads)
    if static.get("shared_bytes"):
        limits["shared memory"] = t.shared_bytes_per_cu // static["shared_bytes"]
    return limits


def _static_model(record: dict, objective: str) -> str:
    estimate = (record.get("static") or {}).get("estimate") or {}
    fields = {k: v for k, v in estimate.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    text = (f"The accept rule compares static estimates, not measurements: {objective}.\n"
            f"The record's estimate ({estimate.get('kind', 'static_estimate')}) gives: "
            + ", ".join(f"{k} {v}" for k, v in fields.items()))
    if estimate.get("bound"):
        text += f"; bound: {estimate['bound']}; stall cycles per iteration {json.dumps(estimate.get('stall_cycles'))}"
    text += _kernel_estimate(record.get("static") or {})
    leaves_out = _static_model_leaves_out()
    if leaves_out:
        text += f"\nWhat the model leaves out (docs/static-model.md): {leaves_out}"
    return text


def _kernel_estimate(static: dict) -> str:
    """The static objective and what it is built from: useful TFLOP/s of the whole kernel (a static estimate)."""
    tp = static.get("throughput")
    if not tp:
        return ""
    limits = ", ".join(tp.get("resident_limited_by") or []) or "n/a"
    return (f"\nThe static objective, estimated_tflops: {static.get('estimated_tflops')} (useful 2*M*N*K FLOPs over "
            f"the estimated kernel time; useful_fraction {static.get('useful_fraction')} of the issued matrix FLOPs): "
            f"{tp['tiles']} tiles x {tp['iterations_per_tile']} K iterations, {tp['resident_ctas']} resident CTA(s) "
            f"per CU/SM (limited by {limits}) sharing the matrix pipe as {tp['streams_per_pipe']} stream(s), "
            f"{tp['shared_iteration_cycles']} cycles per shared iteration, {tp['waves']} round(s) on the busiest "
            f"CU/SM.")


def _static_model_leaves_out() -> str:
    try:
        doc = STATIC_MODEL_DOC.read_text()
    except OSError:
        return ""
    if LEAVES_OUT not in doc:
        return ""
    section = doc.split(LEAVES_OUT, 1)[1].split("\n## ", 1)[0]
    return " ".join(section.split())


def _runtime_lines(record: dict) -> list[str]:
    runtime = record.get("runtime") or {}
    if not runtime:
        return []
    f = figures(record)
    measured = (f"- measured on {f.device} ({f.timing_method}): TFLOPS {runtime.get('tflops')}, efficiency "
                f"{runtime.get('efficiency')}, vs vendor {runtime.get('ratio_vs_vendor')}, "
                f"correct {runtime.get('correct')}")
    lines = [measured]
    if runtime.get("launch_bound"):
        host = runtime.get("host_us_per_call")
        lines.append("- the runtime says this kernel is launch-bound: host time per call "
                     + (f"{host:.1f} us" if isinstance(host, (int, float)) else "n/a")
                     + f" against {runtime.get('median_ms', 'n/a')} ms of GPU time per call")
    return lines


def evaluation_section(target_name: str, record: dict, brief: Brief, objective: str) -> str:
    static = record.get("static") or {}
    lines = [f"- status: {record.get('status')}", f"- headline: {headline(record)}"]
    lines += _shape_and_grid(target_name, record)
    if static:
        lines += _registers_and_occupancy(target_name, static)
    loop = static.get("hot_loop") or {}
    mix = {k: v for k, v in loop.items() if isinstance(v, int) and v and not k.endswith("_cycles")}
    if mix:
        lines.append(f"- hot-loop instruction counts per iteration (loop {loop.get('header')}): {json.dumps(mix)}")
    if "accumulator_moves" in loop:
        lines.append(f"- accumulator moves (register-file copies around the matrix unit, no arithmetic): "
                     f"{loop['accumulator_moves']} per iteration, counted apart from the {loop.get('valu')} other "
                     "vector ALU instructions")
    lines += _runtime_lines(record)
    text = "\n".join(lines)
    if brief.static_objective and static.get("estimate"):
        text += "\n\n" + _static_model(record, objective)
    return text


def hot_loop_section(record: dict) -> str:
    loop = (record.get("static") or {}).get("hot_loop") or {}
    if loop.get("view"):
        whole = loop.get("instructions", 0) == loop["view"].count("\n") + 1
        note = ("(the whole loop)" if whole else
                "(compressed: every matrix instruction, wait, barrier and LDS/shared-memory access in order; the "
                "instructions between them elided and counted)")
        return f"{note}\n```\n{loop['view']}\n```"
    if loop.get("excerpt"):
        return ("(the evaluator gave only the loop's first instructions)\n"
                f"```\n{loop['excerpt']}\n```")
    return "(no hot loop found in the compiled kernel)"


# -- the kernel and its history -------------------------------------------------------------------------------

# Figures a docstring may quote, and the static-record field each one is checked against.
DOC_FIGURES = (
    (re.compile(r"(\d+) arch VGPRs?"), "arch_vgprs"),
    (re.compile(r"\.vgpr_count (\d+)"), "total_vgprs"),
    (re.compile(r"(\d+) AGPRs?"), "agprs"),
    (re.compile(r"(\d+) SGPRs?"), "sgprs"),
    (re.compile(r"(\d+) registers(?: per thread)?"), "registers"),
    (re.compile(r"([\d,]+) bytes of (?:LDS|shared memory)"), "shared_bytes"),
)


def stale_docstring_figures(source: str, record: dict) -> list[str]:
    """Figures quoted in the kernel's docstring that differ from its evaluation."""
    doc = module_docstring(source) or ""
    static = record.get("static") or {}
    stale = []
    for pattern, key in DOC_FIGURES:
        if key not in static:
            continue
        for match in pattern.finditer(doc):
            quoted = int(match.group(1).replace(",", ""))
            if quoted != static[key]:
                stale.append(f"'{match.group(0)}' (this evaluation: {key} {static[key]})")
    return stale


def ladder_section(brief: Brief, incumbent_source: str) -> str:
    if not brief.stages:
        return "- (no reference ladder for this kernel)"
    text = "\n".join(f"- {s.name}: {s.technique}" for s in brief.stages)
    index = _nearest_stage(brief.stages, incumbent_source)
    if index + 1 < len(brief.stages):
        nxt, prev = brief.stages[index + 1], brief.stages[index]
        diff = compact_diff(_without_docstring(prev.source), _without_docstring(nxt.source), context=1,
                            limit=LADDER_DIFF_LINES)
        text += (f"\n\n### How the ladder applied its next technique after {prev.name}: {nxt.name}\n"
                 f"Its docstring:\n\"\"\"\n{module_docstring(nxt.source) or nxt.summary}\n\"\"\"\n"
                 f"Its code diff against {prev.name} (docstring left out):\n```diff\n{diff}\n```\n"
                 "(A lesson, not a patch: the current kernel may differ from the stage the diff starts from.)")
    return text


def _without_docstring(source: str) -> str:
    """The source with its module docstring removed (the prompt shows the docstring on its own)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    first = tree.body[0] if tree.body else None
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)):
        return source
    lines = source.splitlines(keepends=True)
    return "".join(lines[:first.lineno - 1] + lines[first.end_lineno:])


def _nearest_stage(stages: tuple[Stage, ...], source: str) -> int:
    """The stage the incumbent is closest to (by shared lines)."""
    lines = source.splitlines()
    scores = [difflib.SequenceMatcher(None, s.source.splitlines(), lines, autojunk=False).quick_ratio()
              for s in stages]
    return max(range(len(stages)), key=lambda i: scores[i])


def history_section(context: ProposalContext) -> str:
    attempts = context.history[-HISTORY_LIMIT:]
    if not attempts:
        return "- (none yet)"
    out = []
    for i, a in enumerate(attempts):
        out.append(f"- step {a.step}.{a.candidate}: {a.verdict} - {a.summary} - {a.reason} [{a.headline}]")
        if a.diff and i >= len(attempts) - HISTORY_DIFFS:
            out.append(f"```diff\n{a.diff}\n```")
    return "\n".join(out)


def failure_section(record: dict, source: str | None) -> str:
    where = f" at line {record['line']}" if record.get("line") else ""
    text = f"status {record.get('status')}{where}: {record.get('message')}"
    runtime = record.get("runtime") or {}
    if runtime.get("correct") is False:
        text += f"\nwrong results: {json.dumps(runtime, default=str)[:1500]}"
    if source and record.get("line"):
        lines = source.splitlines()
        n = int(record["line"])
        if 1 <= n <= len(lines):
            text += f"\nthat line reads: {lines[n - 1].strip()}"
    return text


def slot_section(context: ProposalContext, slot: Slot) -> str:
    if slot.idea is not None:
        return _idea_task(context, slot)
    text = f"Propose one change to the current kernel for step {context.step}."
    if slot.total > 1:
        text = (f"This is request {slot.index} of {slot.total} sent at the same time for step {context.step}; each "
                "should bring a different idea. Rank the changes you believe most promising and not yet tried "
                f"(see the attempts above), then propose your number {slot.index}.")
    if slot.siblings:
        text += ("\nCandidates of this step already received (propose something else):\n"
                 + "\n".join(f"- {title}" for title in slot.siblings))
    return text


def _idea_task(context: ProposalContext, slot: Slot) -> str:
    idea = slot.idea
    text = (f"Step {context.step} was planned first: a ranked list of distinct ideas, one per request. This request "
            f"({slot.index} of {slot.total}) implements {idea.label}.\n- what to change: {idea.change or '(as named)'}"
            f"\n- the evidence it addresses: {idea.evidence or '(not given)'}\n"
            "Implement this idea and no other: one focused change to the current kernel. If you find it cannot "
            "work as stated, make the closest change that tests it and say why in your explanation.")
    if slot.sibling_ideas:
        text += ("\nThe step's other requests implement these ideas (do not implement them here):\n"
                 + "\n".join(f"- {i.label}" for i in slot.sibling_ideas))
    if slot.siblings:
        text += "\nCandidates of this step already received:\n" + "\n".join(f"- {t}" for t in slot.siblings)
    return text


# -- messages -------------------------------------------------------------------------------------------------


def system_message(target: str, objective: str) -> str:
    return (
        f"You are an expert GPU kernel engineer optimizing a GEMM kernel written in Triton's Gluon dialect "
        f"(Triton {installed_triton()}) for {target}. Every proposal is compiled for the target and checked by an evaluator; "
        f"it is accepted only if it improves: {objective}.\n\n"
        "The file follows a contract: keep its module-level TARGET, DTYPE, OUT_DTYPE, SHAPES, SHAPE_MULTIPLE, "
        "KNOBS (and KNOB_CHOICES if present) declarations and its `launch(a, b, c, **knobs)` function, which "
        "computes C[M,N] = A[M,K] @ B[N,K]^T into the preallocated c without allocating tensors or calling "
        "torch matmul. Results must stay correct for every shape in SHAPES. Keep the module docstring true: "
        "update figures it quotes when your change alters them.\n\n"
        "Reply with a short explanation of one focused change and why it should help (its first line becomes "
        "the commit subject), then the edit in one of these formats:\n\n" + format_instructions())


def evidence_sections(context: ProposalContext, brief: Brief, objective: str = "") -> list[str]:
    """The sections every request of a step shares: target facts, API sheet, ladder, kernel, evaluation, hot
    loop, the last failure and the run's attempts."""
    dtype = declaration(context.incumbent_source, "DTYPE")
    record = context.incumbent_record
    kernel = f"```python\n{context.incumbent_source}```"
    stale = stale_docstring_figures(context.incumbent_source, record)
    if stale:
        kernel += ("\nFigures in its docstring that no longer match its evaluation (fix them if you touch "
                   "that text): " + "; ".join(stale))
    sheet = api_sheet(s.source for s in brief.stages)
    parts = [
        f"## Hardware facts ({context.target}; vendor figures, not measurements)\n"
        + hardware_facts(context.target, dtype),
        f"## Matrix instructions of this kernel ({dtype} on {context.target})\n" + matrix_facts(context.target, record),
    ]
    if sheet:
        parts.append("## Gluon API of the installed Triton\n" + sheet)
    parts += [
        "## Playbook: the reference ladder's techniques, in order\n" + ladder_section(brief, context.incumbent_source),
        "## Current kernel (the incumbent)\n" + kernel,
        "## Its evaluation\n" + evaluation_section(context.target, record, brief, objective),
        "## Its hot loop\n" + hot_loop_section(record),
    ]
    last = context.last_record
    if last is not None and last.get("status") != "ok":
        parts.append("## The last candidate failed\n" + failure_section(last, context.last_source))
    parts.append("## Attempts so far in this run (do not repeat ideas that failed)\n" + history_section(context))
    return parts


def user_message(context: ProposalContext, brief: Brief, slot: Slot, objective: str = "") -> str:
    parts = evidence_sections(context, brief, objective)
    parts.append("## Task\n" + slot_section(context, slot))
    return "\n\n".join(parts) + "\n"


def plan_system_message(target: str, objective: str) -> str:
    return (
        f"You are an expert GPU kernel engineer planning the next optimization step of a GEMM kernel written in "
        f"Triton's Gluon dialect (Triton 3.6.0) for {target}. Each idea you list will be implemented by its own "
        f"request, compiled for the target and checked by an evaluator; a candidate is accepted only if it "
        f"improves: {objective}.\n\nThis request writes no code. It ranks distinct ideas, each tied to the "
        "evidence it addresses.")


def plan_message(request: PlanRequest, brief: Brief, objective: str = "") -> str:
    context = request.context
    parts = evidence_sections(context, brief, objective)
    parts.append("## Ideas tried earlier in this run (each with what became of it)\n" + tried_section(request.tried))
    parts.append(f"## Task: plan step {context.step}\n" + f"{request.count} implementation requests will follow, "
                 f"one per idea: request k gets your idea k. " + reply_format(request.count))
    return "\n\n".join(parts) + "\n"


def plan_messages(request: PlanRequest, brief: Brief, objective: str) -> list[dict]:
    return [{"role": "system", "content": plan_system_message(request.context.target, objective)},
            {"role": "user", "content": plan_message(request, brief, objective)}]


@dataclass(frozen=True)
class SectionSize:
    """One `## ` section of a prompt: characters and tokens at about 4 characters per token (an estimate)."""

    title: str
    characters: int
    tokens_estimate: int


CHARS_PER_TOKEN = 4.0


def section_sizes(text: str) -> list[SectionSize]:
    """The prompt's sections in order (what precedes the first `## ` heading is the "preamble")."""
    sizes = []
    for n, chunk in enumerate(re.split(r"(?m)^(?=## )", text)):
        if not chunk:
            continue
        title = chunk.splitlines()[0][3:].strip() if chunk.startswith("## ") else "preamble (system message)"
        if n and not chunk.startswith("## "):
            title = "(untitled)"
        sizes.append(SectionSize(title, len(chunk), round(len(chunk) / CHARS_PER_TOKEN)))
    return sizes


def render(messages: list[dict]) -> str:
    """A conversation as markdown, for the ledger's prompt.md."""
    return "\n\n".join(f"<!-- role: {m['role']} -->\n{m['content']}" for m in messages) + "\n"
