"""Write the prompts the llm (and manual) proposer sends for real gfx950 and sm90 kernels, and measure them.

Everything in them is real: the incumbent is a reference stage compiled and evaluated here (static
evaluation, CPU only), and the run's history holds one real attempt, a knob variant of the incumbent that
was compiled, evaluated and judged by the static accept rule. For step 2 of a run with K = 2 it writes the
planning request (`plan_prompt_<target>.txt`) and implementation request 1 of 2, assigned idea 1 of an
example plan (`prompt_<target>.txt`); then `docs/prompt-sections.md`: characters and estimated tokens
(about 4 characters per token, an estimate) of every section of the implementation prompt for the
kernels of SIZED, so a reader can see where a prompt's size goes.

usage: python docs/examples/make_prompts.py [--out DIR] [--sections FILE]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from agent.evaluation import OBJECTIVES, STATIC, judge_static
from agent.figures import headline
from agent.ideas import Idea, Plan, TriedIdea
from agent.prompt import (
    Brief,
    Slot,
    plan_messages,
    render,
    section_sizes,
    system_message,
    user_message,
)
from agent.proposers import Attempt, PlanRequest, ProposalContext
from agent.proposers.ladder import load_stages
from agent.source import compact_diff, declaration, replace_knobs, sha256
from evaluator.api import evaluate_static

ROOT = Path(__file__).resolve().parents[2]
# (target, incumbent stage, the knob change tried before): the example kernels of the closing note.
CASES = (
    ("gfx950", "kernels/gfx950/fp16/v05_local_prefetch.py", {"num_warps": 8}),
    ("sm90", "kernels/sm90/bf16/v04_async_wgmma.py", {"NUM_STAGES": 4}),
)
# Kernels whose implementation prompt is measured section by section (the stages the real-model runs start from).
SIZED = (
    ("gfx950", "kernels/gfx950/fp16/v00_naive.py", {"num_warps": 8}),
    ("gfx950", "kernels/gfx950/fp16/v09_beyond_hotloop.py", {"num_warps": 8}),
    ("sm90", "kernels/sm90/bf16/v05_two_warpgroups.py", {"NUM_STAGES": 4}),
    ("sm90", "kernels/sm90/bf16/v10_split_k.py", {"NUM_STAGES": 4}),
)
EXAMPLE_PLAN = Plan((Idea(1, "Example idea one", "the hot loop's waits", "an example change"),
                     Idea(2, "Example idea two", "occupancy", "another example change")))


def context_for(target: str, stage: Path, change: dict) -> ProposalContext:
    source = stage.read_text()
    record = evaluate_static(str(stage))
    knobs = declaration(source, "KNOBS")
    variant = replace_knobs(source, {**knobs, **{k: v for k, v in change.items() if k in knobs}})
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.py"
        path.write_text(variant)
        variant_record = evaluate_static(str(path))
    judgement = judge_static(variant_record, record)
    verdict = "passed" if judgement.passed else "rejected"
    title = "tune " + ", ".join(f"{k} -> {v}" for k, v in change.items())
    attempt = Attempt(step=1, candidate=1, verdict=verdict, reason=judgement.reason, summary=title,
                      source_sha256=sha256(variant), headline=headline(variant_record),
                      diff=compact_diff(source, variant))
    return ProposalContext(target=target, step=2, count=2, incumbent_source=source, incumbent_record=record,
                           last_record=variant_record, last_source=variant, history=(attempt,),
                           tried=frozenset({sha256(source), sha256(variant)}), plan=EXAMPLE_PLAN)


def prompts_for(target: str, stage: Path, change: dict) -> tuple[str, str]:
    """(implementation request 1 of 2 with idea 1 assigned, the step's planning request)."""
    context = context_for(target, stage, change)
    brief = Brief(tuple(load_stages(stage.parent)), static_objective=True)
    objective = OBJECTIVES[STATIC]
    slot = Slot(1, 2, idea=EXAMPLE_PLAN.idea(1), sibling_ideas=(EXAMPLE_PLAN.idea(2),))
    messages = [{"role": "system", "content": system_message(target, objective)},
                {"role": "user", "content": user_message(context, brief, slot, objective)}]
    tried = (TriedIdea(1, 1, context.history[0].summary, context.history[0].verdict, context.history[0].reason),)
    plan = plan_messages(PlanRequest(context, 2, tried), brief, objective)
    return render(messages), render(plan)


def sections_table(rows: list[tuple[str, str, str]]) -> str:
    """Markdown: one table per kernel, each section's characters, estimated tokens and share of the prompt."""
    out = ["# How much of a prompt each section takes",
           "",
           "Made by `python docs/examples/make_prompts.py` (implementation request 1 of 2 of step 2, static mode,",
           "one earlier attempt in the history; `agent.prompt.section_sizes`). Characters are counted; tokens are an",
           "**estimate** at 4 characters per token, not a tokenizer's count. Which sections real replies relied on is",
           "for the real-model runs (benchmarks/results/real_model_*) to say.", ""]
    for target, stage, text in rows:
        sizes = section_sizes(text)
        total = sum(s.characters for s in sizes)
        out += [f"## {target} {Path(stage).stem}: {total} characters, ~{round(total / 4)} tokens (estimate)", "",
                "| section | characters | tokens (est.) | share |", "|---|---:|---:|---:|"]
        out += [f"| {s.title} | {s.characters} | {s.tokens_estimate} | {s.characters / total:.0%} |" for s in sizes]
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "examples"))
    parser.add_argument("--sections", default=str(ROOT / "docs" / "prompt-sections.md"))
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for target, stage, change in CASES:
        text, plan = prompts_for(target, ROOT / stage, change)
        for name, body in ((f"prompt_{target}.txt", text), (f"plan_prompt_{target}.txt", plan)):
            (out / name).write_text(body)
            print(f"{out / name}: {len(body)} characters ({stage}, step 2)")
    rows = [(target, stage, prompts_for(target, ROOT / stage, change)[0]) for target, stage, change in SIZED]
    Path(args.sections).write_text(sections_table(rows))
    print(f"{args.sections}: section sizes of {len(rows)} prompts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
