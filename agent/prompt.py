"""The LLM prompt: everything a model needs to propose one better kernel, and nothing it has to guess.

It carries the target's hardware facts (from evaluator.targets), a playbook of the ladder's techniques
(read from the reference stages themselves, so it never drifts from them), the current kernel, its
evaluation (figures, bound, hot-loop ISA excerpt), the last failure with where it happened, and the run's
attempt history with verdicts so failed ideas are not repeated.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from evaluator.targets import get_target

from .edits import format_instructions
from .figures import STATIC_KEYS, figures, headline
from .proposers import ProposalContext

HISTORY_LIMIT = 30
MATRIX_FACTS_LIMIT = 8


@dataclass(frozen=True)
class PlaybookEntry:
    stage: str
    technique: str


def hardware_facts(target_name: str, dtype: str | None) -> str:
    t = get_target(target_name)
    peak = t.peak_tflops.get(dtype or "", None)
    lines = [
        f"- target {t.name} ({', '.join(t.devices)}); backend {t.backend}, arch {t.arch}, warp/wave size {t.warp_size}",
        (f"- {t.compute_units} compute units (CUs/SMs), {t.simds_per_cu} SIMDs or sub-partitions each, "
        f"up to {t.max_waves_per_simd} waves per SIMD, engine clock up to {t.clock_ghz} GHz (datasheet)"),
        (f"- registers: {t.register_file} per {t.register_file_unit}, at most {t.max_registers_per_thread} per thread; "
        f"shared memory / LDS {t.shared_bytes_per_cu // 1024} KiB per CU/SM"),
    ]
    if peak:
        lines.append(f"- datasheet dense peak for {dtype}: {peak} TFLOP/s")
    cycles = list(t.matrix_cycles.items())[:MATRIX_FACTS_LIMIT]
    if cycles:
        note = f" ({t.matrix_cycles_note})" if t.matrix_cycles_note else ""
        lines.append("- matrix-unit cycles per instruction (the static model's table): "
                     + ", ".join(f"{k} {v}" for k, v in cycles) + note)
    return "\n".join(lines)


def _evaluation_section(record: dict) -> str:
    f = figures(record)
    static = record.get("static") or {}
    lines = [f"- status: {f.status}", f"- headline: {headline(record)}"]
    for key in STATIC_KEYS:
        if key in static:
            label = " (static estimate, 0..1)" if key == "estimated_efficiency" else ""
            lines.append(f"- {key}: {static[key]}{label}")
    estimate = static.get("estimate") or {}
    if estimate.get("bound"):
        lines.append(f"- static model says the hot loop is bound by: {estimate['bound']}; stall cycles "
                     f"{json.dumps(estimate.get('stall_cycles', {}))}")
    loop = static.get("hot_loop") or {}
    mix = {k: v for k, v in loop.items() if isinstance(v, int)}
    if mix:
        lines.append(f"- hot-loop instruction mix: {json.dumps(mix)}")
    runtime = record.get("runtime")
    if runtime:
        lines.append(f"- measured on {f.device} ({f.timing_method}): {json.dumps(runtime, default=str)[:1500]}")
    text = "\n".join(lines)
    if loop.get("excerpt"):
        text += f"\n\nHot-loop ISA excerpt:\n```\n{loop['excerpt']}\n```"
    return text


def _failure_section(record: dict, source: str | None) -> str:
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


def _history_section(context: ProposalContext) -> str:
    rows = [f"- step {a.step}.{a.candidate}: {a.verdict} - {a.summary} - {a.reason} [{a.headline}]"
            for a in context.history[-HISTORY_LIMIT:]]
    return "\n".join(rows) or "- (none yet)"


def system_message(target: str, objective: str) -> str:
    return (
        f"You are an expert GPU kernel engineer optimizing a GEMM kernel written in Triton's Gluon dialect "
        f"(Triton 3.6.0) for {target}. Every proposal is compiled for the target and checked by an evaluator; "
        f"it is accepted only if it improves: {objective}.\n\n"
        "The file follows a contract: keep its module-level TARGET, DTYPE, OUT_DTYPE, SHAPES, SHAPE_MULTIPLE, "
        "KNOBS (and KNOB_CHOICES if present) declarations and its `launch(a, b, c, **knobs)` function, which "
        "computes C[M,N] = A[M,K] @ B[N,K]^T into the preallocated c without allocating tensors or calling "
        "torch matmul. Results must stay correct for every shape in SHAPES.\n\n"
        "Reply with a short explanation of one focused change and why it should help, then the edit in one of "
        "these formats:\n\n" + format_instructions())


def user_message(context: ProposalContext, playbook: list[PlaybookEntry], dtype: str | None) -> str:
    parts = [
        f"## Hardware facts ({context.target}; vendor figures, not measurements)\n"
        + hardware_facts(context.target, dtype),
        "## Playbook: the reference ladder's techniques, in order\n"
        + ("\n".join(f"- {p.stage}: {p.technique}" for p in playbook) or "- (no ladder for this target)"),
        f"## Current kernel (the incumbent)\n```python\n{context.incumbent_source}```",
        "## Its evaluation\n" + _evaluation_section(context.incumbent_record),
    ]
    last = context.last_record
    if last is not None and last.get("status") != "ok":
        parts.append("## The last candidate failed\n" + _failure_section(last, context.last_source))
    parts.append("## Attempts so far in this run (do not repeat ideas that failed)\n" + _history_section(context))
    parts.append(f"## Task\nPropose one change to the current kernel for step {context.step}.")
    return "\n\n".join(parts) + "\n"


def render(messages: list[dict]) -> str:
    """A conversation as markdown, for the ledger's prompt.md."""
    return "\n\n".join(f"<!-- role: {m['role']} -->\n{m['content']}" for m in messages) + "\n"
