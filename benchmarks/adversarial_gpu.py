"""Run the whole adversarial suite (GPU cases included) in one loop and save what each case got.

    python benchmarks/adversarial_gpu.py --out benchmarks/results            # on the H200
    python benchmarks/adversarial_gpu.py --out /tmp/x --name adversarial_cpu # anywhere: GPU cases are skipped

Writes NAME.json (every outcome, device, versions, date, command) and NAME.md (a table) into --out. Exits 0
only when every case that could run got the verdict the manifest expects. All cases run in this one process,
in manifest order, so a completed file is also the evidence that the caller survives the suite.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the suite's manifest and runner live under tests/, not in the package

from benchmarks.results_meta import markdown_lines, run_metadata
from tests.adversarial.cases import CASES
from tests.adversarial.runner import Outcome, describe_environment, detect_target, run_case


def _skipped(case) -> Outcome:
    return Outcome(case.name, case.defense, case.expect, "skipped", True, f"needs a {case.target} GPU", 0.0,
                   case.gpu)


def _markdown(report: dict) -> str:
    env = report["environment"]
    device = env.get("device") or {}
    lines = [
        f"# Adversarial suite: {report['summary']['passed']} of {report['summary']['ran']} cases got their verdict"
        + ("" if report.get("complete", True) else " (run cut short: the cases run so far)"),
        "",
        *markdown_lines(report["meta"]),
        f"- device: {device.get('name', 'none')} (driver {device.get('driver')}), target {report['target']}",
        (f"- versions: python {env.get('python')}, torch {env.get('torch')}, triton {env.get('triton')}, "
         f"CUDA {env.get('cuda')}, HIP {env.get('hip')}"),
        (f"- skipped (no GPU of their target): {report['summary']['skipped']}; total wall time "
         f"{report['wall_s']:.0f} s, all cases in one process"),
        "",
        "| case | defense | expected | got | ok | wall s | detail |",
        "|---|---|---|---|---|---|---|",
    ]
    for o in report["cases"]:
        detail = o["detail"].replace("|", "/").replace("\n", " ")[:140]
        mark = "skip" if o["got"] == "skipped" else ("yes" if o["passed"] else "**NO**")
        lines.append(f"| {o['name']} | {o['defense']} | {o['expected']} | {o['got']} | {mark} | {o['wall_s']:.1f} "
                     f"| {detail} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"), help="directory for NAME.json/.md")
    parser.add_argument("--name", default="adversarial_h200", help="file name stem")
    parser.add_argument("--only", action="append", default=[], metavar="CASE", help="run only these cases")
    parser.add_argument("--skip", action="append", default=[], metavar="CASE", help="leave these cases out")
    args = parser.parse_args(argv)

    started = time.monotonic()
    meta = run_metadata()
    target = detect_target()  # also starts the warm sandbox worker, so no case's wall time includes that
    environment = describe_environment()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    chosen = [c for c in CASES if not ((args.only and c.name not in args.only) or c.name in args.skip)]
    outcomes: list[Outcome] = []
    for case in chosen:
        outcome = run_case(case, target) if not case.gpu or case.target == target else _skipped(case)
        outcomes.append(outcome)
        mark = "skip" if outcome.got == "skipped" else ("ok" if outcome.passed else "BAD")
        print(f"{mark:4s} {outcome.name:32s} {outcome.got:18s} {outcome.wall_s:6.1f} s  "
              f"{outcome.detail[:90]}", flush=True)
        report = _report(meta, target, environment, started, outcomes, complete=len(outcomes) == len(chosen))
        _write(out, args.name, report)  # after every case, so a run cut short keeps every verdict it got
    print(f"{report['summary']['passed']}/{report['summary']['ran']} cases got their verdict; "
          f"wrote {out / args.name}.json/.md")
    return 0 if not report["summary"]["failed"] else 1


def _report(meta: dict, target, environment: dict, started: float, outcomes: list[Outcome], complete: bool) -> dict:
    ran = [o for o in outcomes if o.got != "skipped"]
    return {"meta": meta, "target": target, "environment": environment, "complete": complete,
            "wall_s": round(time.monotonic() - started, 1),
            "summary": {"ran": len(ran), "passed": sum(o.passed for o in ran), "skipped": len(outcomes) - len(ran),
                        "failed": [o.name for o in ran if not o.passed]},
            "cases": [o.to_dict() for o in outcomes]}


def _write(out: Path, name: str, report: dict) -> None:
    (out / f"{name}.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / f"{name}.md").write_text(_markdown(report))


if __name__ == "__main__":
    sys.exit(main())
