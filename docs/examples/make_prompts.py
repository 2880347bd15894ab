"""Write the full conversation the llm proposer opens for one gfx950 and one sm90 kernel.

Everything in them is real: the incumbent is a reference stage compiled and evaluated here (static
evaluation, CPU only), and the run's history holds one real attempt, a knob variant of the incumbent that
was compiled, evaluated and judged by the static accept rule. The prompt is the one for request 1 of 2 of
step 2. Writes docs/examples/prompt_<target>.txt and prints each file's size in characters.

usage: python docs/examples/make_prompts.py [--out DIR]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from agent.evaluation import OBJECTIVES, STATIC, judge_static
from agent.figures import headline
from agent.prompt import Brief, Slot, render, system_message, user_message
from agent.proposers import Attempt, ProposalContext
from agent.proposers.ladder import load_stages
from agent.source import compact_diff, declaration, replace_knobs, sha256
from evaluator.api import evaluate_static

ROOT = Path(__file__).resolve().parents[2]
# (target, incumbent stage, the knob change tried before): the example kernels of the closing note.
CASES = (
    ("gfx950", "kernels/gfx950/fp16/v05_local_prefetch.py", {"num_warps": 8}),
    ("sm90", "kernels/sm90/bf16/v04_async_wgmma.py", {"NUM_STAGES": 4}),
)


def prompt_for(target: str, stage: Path, change: dict) -> str:
    source = stage.read_text()
    record = evaluate_static(str(stage))
    variant = replace_knobs(source, {**declaration(source, "KNOBS"), **change})
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
    context = ProposalContext(target=target, step=2, count=2, incumbent_source=source, incumbent_record=record,
                              last_record=variant_record, last_source=variant, history=(attempt,),
                              tried=frozenset({sha256(source), sha256(variant)}))
    stages = tuple(load_stages(stage.parent))
    objective = OBJECTIVES[STATIC]
    messages = [{"role": "system", "content": system_message(target, objective)},
                {"role": "user", "content": user_message(context, Brief(stages, static_objective=True),
                                                         Slot(1, 2), objective)}]
    return render(messages)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "examples"))
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for target, stage, change in CASES:
        text = prompt_for(target, ROOT / stage, change)
        path = out / f"prompt_{target}.txt"
        path.write_text(text)
        print(f"{path}: {len(text)} characters ({stage}, request 1 of 2 of step 2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
