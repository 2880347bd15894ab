"""Run one adversarial case and judge its outcome against the manifest (used by the tests and the benchmark)."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from evaluator import api, integrity
from evaluator.isolated import run_guarded
from evaluator.sandbox import run_isolated

from .cases import CANDIDATES, Case


@dataclass(frozen=True)
class Outcome:
    """What one case got, and whether that is what the manifest expects."""

    name: str
    defense: str
    expected: str
    got: str
    passed: bool
    detail: str
    wall_s: float
    gpu: bool
    runtime_ran: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


def _process_gone(pid: int, wait_s: float = 3.0) -> bool:
    """True once `pid` no longer runs (gone, or a zombie waiting for init to reap it)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if state in ("Z", "X"):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _fill(kwargs: dict, tmp: Path, watch: Path | None) -> dict:
    return {k: v.format(tmp=tmp, watch=watch) if isinstance(v, str) else v for k, v in kwargs.items()}


def _judge_record(case: Case, record: dict, target_present: bool) -> tuple[str, bool, str, bool]:
    status = record.get("status", "?")
    message = record.get("message") or ""
    runtime = record.get("runtime")
    runtime_ran = isinstance(runtime, dict)
    if case.expect == "policy_violation":
        rules = [v["rule"] for v in record.get("policy", {}).get("violations", [])]
        passed = status == "policy_violation" and case.rule in rules
        return status, passed, f"rules {rules}: {message}", runtime_ran
    if case.expect == "rejected":
        passed = status != "ok" and (not case.reasons or status in case.reasons)
        return status, passed, message, runtime_ran
    passed = status == case.expect
    if case.expect == "ok" and target_present:  # on its own GPU an honest kernel must also pass the runtime stage
        passed = passed and runtime_ran and runtime.get("status") == "ok"
    if case.healthy_after:
        health = record.get("gpu_health") or {}
        passed = passed and bool(health.get("healthy"))
        message = f"{message} | GPU health after: {health}"
    return status, passed, message, runtime_ran


def _judge_comparison(case: Case, present_target: str | None) -> tuple[str, bool, str, bool]:
    """Check the candidate with `eval --run` first (it may pass: the cheat hides there), then compare it."""
    record = api.evaluate(case.path, run=True, timeout_s=case.timeout_s)
    incumbent = CANDIDATES / f"{case.kwargs['incumbent']}.py"
    result = api.compare(case.path, incumbent, timeout_s=case.timeout_s)
    got = result.get("error") or result.get("candidate_status") or "?"
    passed = got == case.expect and not result.get("accepted")
    detail = (f"eval --run: {record.get('status')}; compare: accepted={result.get('accepted')} "
              f"{result.get('candidate_verdict') or result.get('message') or ''}")
    return got, passed, detail, isinstance(record.get("runtime"), dict)


def _judge_static_pair(case: Case, cheat: dict, honest: dict) -> tuple[str, bool, str]:
    """The cheat must score a lower static objective than its honest counterpart and report wasted work."""
    figures = [(r.get("static") or {}) for r in (cheat, honest)]
    scores = [f.get("estimated_tflops") for f in figures]
    useful = figures[0].get("useful_fraction")
    detail = (f"estimated_tflops {scores[0]} vs honest {scores[1]}; useful_fraction {useful}; "
              f"estimated_efficiency {figures[0].get('estimated_efficiency')} vs {figures[1].get('estimated_efficiency')}")
    if any(r.get("status") != "ok" for r in (cheat, honest)) or None in scores or useful is None:
        return f"{cheat.get('status')}/{honest.get('status')}", False, f"no static objective: {detail}"
    got = "lower_score" if scores[0] < scores[1] and useful < 1.0 else "not_lower"
    return got, got == case.expect, detail


def run_case(case: Case, present_target: str | None = None) -> Outcome:
    """Run `case` and judge it; never raises for what the candidate does."""
    started = time.monotonic()
    runtime_ran = False
    with tempfile.TemporaryDirectory(prefix=f"nearpeak-adv-{case.name}-") as scratch:
        tmp = Path(scratch)
        if case.kind == "file":
            record = api.evaluate(case.path, timeout_s=case.timeout_s)
            got, passed, detail, runtime_ran = _judge_record(case, record, present_target == case.target)
        elif case.kind == "api":
            record = api.evaluate(case.path, run=False, timeout_s=case.timeout_s)
            got, passed, detail, runtime_ran = _judge_record(case, record, False)
        elif case.kind == "foreign":
            records = api.evaluate_foreign(case.path, case.kwargs["entry"], case.kwargs["args"], case.target,
                                           timeout_s=case.timeout_s)
            got, passed, detail, runtime_ran = _judge_record(case, records[0], False)
        elif case.kind == "compare":
            got, passed, detail, runtime_ran = _judge_comparison(case, present_target)
        elif case.kind == "call":
            result = run_isolated(case.func, _fill(case.kwargs, tmp, None), timeout_s=case.timeout_s,
                                  memory_mb=case.memory_mb)
            got, detail = result.verdict, result.message or ""
            passed = got == case.expect
            if case.group_killed:
                pid = int((tmp / "pid").read_text())
                gone = _process_gone(pid)
                passed = passed and gone
                detail = f"left-behind pid {pid} {'killed with the group' if gone else 'STILL RUNNING'}"
                if not gone:
                    os.kill(pid, 9)  # our own test's leftover; do not leak it past the suite
        elif case.kind == "guarded":
            watch = tmp / "evaluator"
            shutil.copytree(integrity.EVALUATOR_ROOT, watch, ignore=shutil.ignore_patterns("__pycache__"))
            guarded = run_guarded(case.func, _fill(case.kwargs, tmp, watch), timeout_s=case.timeout_s,
                                  watch_root=watch)
            got = "tampered" if guarded.tampered else guarded.result.verdict
            passed = got == case.expect
            detail = f"changed: {list(guarded.tampered)}"
        elif case.kind == "static_pair":
            baseline = CANDIDATES / f"{case.kwargs['baseline']}.py"
            records = [api.evaluate(p, target=case.target, run=False, timeout_s=case.timeout_s)
                       for p in (case.path, baseline)]
            got, passed, detail = _judge_static_pair(case, *records)
        else:
            raise ValueError(f"unknown case kind {case.kind!r}")
    return Outcome(case.name, case.defense, case.expect if not case.reasons else f"rejected: {'|'.join(case.reasons)}",
                   got, passed, detail[:600], round(time.monotonic() - started, 2), case.gpu, runtime_ran)


def detect_target() -> str | None:
    """The nearpeak target of the GPU here, asked in a sandbox so this process never opens a GPU context."""
    result = run_isolated("tests.adversarial.runner:_detect_in_child", {}, timeout_s=120)
    return result.value if result.ok else None


def _detect_in_child() -> str | None:
    from evaluator.runtime.device import detect

    info = detect(with_smi=False)
    return info.target if info else None


def describe_environment() -> dict:
    """Device, driver and library versions, read in a sandbox (this process never opens a GPU context)."""
    result = run_isolated("tests.adversarial.runner:_environment_in_child", {}, timeout_s=120)
    return result.value if result.ok else {"error": result.message}


def _environment_in_child() -> dict:
    import platform

    import torch
    import triton

    from evaluator.runtime.device import detect

    info = detect()
    return {"python": platform.python_version(), "torch": torch.__version__, "triton": triton.__version__,
            "cuda": torch.version.cuda, "hip": torch.version.hip, "device": info.to_dict() if info else None}


def outcomes_json(outcomes: list[Outcome]) -> str:
    return json.dumps([o.to_dict() for o in outcomes], indent=2)
