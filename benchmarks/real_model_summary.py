"""Summarise a run driven by a real model through the manual proposer: per step, its ideas and what became of them.

    PYTHONPATH=. python benchmarks/real_model_summary.py RUN --name real_model_gfx950_v00 [--out benchmarks/results]

Reads only the run's ledger (agent.reading) and its prompts/ folder: for every step the planned ideas, how many
were distinct, and per candidate the idea it implements, whether the reply applied, compiled, ran correctly,
its verdict and figures (static estimates and measurements labelled as the ledger labels them), the model's
wall time (prompt file written -> reply file written, from their modification times) and its token estimate
(the manual proposer counts characters, not tokens). Writes NAME.json and NAME.md.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.ledger import Ledger
from agent.reading import history_json, run_config
from benchmarks.results_meta import markdown_lines, run_metadata

APPLY_FAILURES = ("no_candidate",)
COMPILE_FAILURES = ("compile_error", "syntax_error", "contract_error", "import_error", "policy_violation")


def _stage(entry: dict, record: dict) -> dict:
    """How far a candidate got: applied, compiled, correct (None where the run never asked)."""
    status = record.get("status")
    applied = entry["verdict"] != "proposal-failed" and status not in APPLY_FAILURES
    compiled = applied and status not in COMPILE_FAILURES
    runtime = record.get("runtime") or {}
    correct = runtime.get("correct") if runtime else None
    return {"applied": applied, "compiled": compiled, "correct": correct, "status": status}


def _model_seconds(prompts: Path, step: int) -> dict[str, float]:
    """Seconds from each prompt file's writing to its reply's, by request name (plan, req-1, ...)."""
    folder = prompts / f"step-{step}"
    out = {}
    for prompt in sorted(folder.glob("*.prompt.md")) if folder.is_dir() else []:
        reply = prompt.with_name(prompt.name.replace(".prompt.md", ".reply.md"))
        if reply.is_file():
            out[prompt.name.replace(".prompt.md", "")] = round(reply.stat().st_mtime - prompt.stat().st_mtime, 1)
    return out


def summarize(run: Path) -> dict:
    ledger = Ledger(run)
    config = run_config(ledger)
    rows = history_json(ledger)["entries"]
    steps: dict[int, dict] = {}
    for row in rows:
        if row["step"] == 0:
            continue
        step_data = json.loads(ledger.read(row["commit"], "step.json") or "{}")
        record = json.loads(ledger.read(row["commit"], "evaluation.json") or "{}")
        step = steps.setdefault(row["step"], {"step": row["step"], "plan": step_data.get("plan"), "candidates": [],
                                              "model_seconds": _model_seconds(run / "prompts", row["step"])})
        step["plan"] = step["plan"] or step_data.get("plan")
        comparison = step_data.get("comparison") or {}
        step["candidates"].append({
            "candidate": row["candidate"], "idea": row["idea"], "title": step_data.get("title"),
            "verdict": row["verdict"], "reason": row["reason"], **_stage(row, record),
            "estimated_tflops": row["tflops_estimate"], "measured_tflops": row["tflops_measured"],
            "speedup_measured": comparison.get("speedup"), "ci": [comparison.get("ci_low"), comparison.get("ci_high")],
            "launch_bound": comparison.get("launch_bound"), "duplicate_of": row["duplicate_of"] or None,
            "compiled_sha256": (record.get("static") or {}).get("compiled_sha256"),
            "tokens_estimate": row["tokens_estimate"], "evaluation_s": step_data.get("elapsed_s")})
    for step in steps.values():
        ideas = [i.get("title") for i in (step["plan"] or {}).get("ideas") or []]
        implemented = [c["idea"] for c in step["candidates"] if c["idea"]]
        hashes = [c["compiled_sha256"] for c in step["candidates"] if c["compiled_sha256"]]
        step.update(ideas=ideas, distinct_implemented=len(set(implemented)), candidates_n=len(step["candidates"]),
                    distinct_compiled=len(set(hashes)), compiled_n=len(hashes))
    return {"run": config.run_id, "target": config.target, "mode": config.mode, "model": config.model,
            "problem": config.problem, "steps": [steps[k] for k in sorted(steps)]}


def markdown(summary: dict, meta: dict) -> str:
    lines = [f"# Real-model run {summary['run']} ({summary['target']}, {summary['mode']})", "", *markdown_lines(meta),
             f"- model: {summary['model']}; problem: {json.dumps(summary['problem'])}", ""]
    for step in summary["steps"]:
        lines += [f"## Step {step['step']}", "",
                  f"Ideas planned ({len(step['ideas'])}): " + "; ".join(f"{n}. {t}" for n, t in
                                                                      enumerate(step["ideas"], 1)), "",
                  f"{step['distinct_implemented']} distinct ideas over {step['candidates_n']} candidates; "
                  f"{step['distinct_compiled']} distinct compiled kernels over {step['compiled_n']} compiled. Model "
                  f"wall time per request (prompt written -> reply written): "
                  + ", ".join(f"{k} {v:.0f} s" for k, v in step["model_seconds"].items()), "",
                  ("| cand. | idea | applied | compiled | correct | verdict | est. TFLOP/s | meas. TFLOP/s | measured A/B "
                  "[95% CI] | tokens (est.) | eval s |"), "|---|---|---|---|---|---|---|---|---|---|---|"]
        for c in step["candidates"]:
            ab = (f"{c['speedup_measured']:.4f} [{c['ci'][0]:.4f}, {c['ci'][1]:.4f}]"
                  + (" launch-bound" if c["launch_bound"] else "")) if c["speedup_measured"] else "-"
            lines.append(f"| {c['candidate']} | {c['idea'] or c['title']} | {c['applied']} | {c['compiled']} | "
                         f"{'-' if c['correct'] is None else c['correct']} | {c['verdict']} | "
                         f"{c['estimated_tflops'] or '-'} | {c['measured_tflops'] or '-'} | {ab} | "
                         f"{c['tokens_estimate'] or '-'} | {c['evaluation_s'] or '-'} |")
        lines += ["", "Reasons:", *[f"- {c['candidate']}: {c['reason']}" for c in step["candidates"]], ""]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="the run's directory")
    parser.add_argument("--name", required=True, help="file name stem, e.g. real_model_gfx950_v00")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = parser.parse_args(argv)
    summary = summarize(Path(args.run))
    meta = run_metadata(argv)
    out = Path(args.out)
    (out / f"{args.name}.json").write_text(json.dumps({"meta": meta, **summary}, indent=1) + "\n")
    (out / f"{args.name}.md").write_text(markdown(summary, meta))
    print(markdown(summary, meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
