"""A fake evaluator and a scripted proposer: the loop's decisions without compiles, on a real git ledger.

The fake evaluator reads a candidate's figures from lines of its source (`EFF = 0.5`, `SPILLS = 2`,
`STATUS = "compile_error"`, `SPEEDUP = 1.2`, ...), so each test states what it feeds the loop in the kernel text.
"""
from __future__ import annotations

import ast
import io

from agent.config import RunConfig
from agent.evaluation import MEASURED, OBJECTIVES, STATIC
from agent.executors.inline import InlineExecutor
from agent.ledger import Ledger
from agent.loop import KERNEL, Budget, Optimizer, baseline_commit
from agent.progress import Progress
from agent.proposers import Candidate, FailedProposal

BASE = "EFF = 0.30\n"
# The fake kernels' static model is taken as nearly exact (the real error bar is tested in test_static_error.py),
# so the loop's decisions follow the EFF lines the tests write.
FAKE_RATIO_ERROR = {"log_sigma": 0.001, "source": "test fixture: a nearly exact model", "pairs": 1,
                    "validated_mechanisms": [], "unvalidated_log_penalty": 0.001}


def figures_in(source: str) -> dict:
    """The NAME = value assignments of a fake kernel."""
    return {node.targets[0].id: ast.literal_eval(node.value) for node in ast.parse(source).body
            if isinstance(node, ast.Assign)}


class FakeEvaluator:
    """Evaluation records made from the kernel's own declarations; counts every call."""

    def __init__(self, interrupt: bool = False):
        self.interrupt = interrupt  # whether `INTERRUPT = True` in a kernel acts as Ctrl-C during its comparison
        self.records: list[tuple[str, bool | None]] = []
        self.compares: list[tuple[str, str]] = []

    def record(self, path, run):
        source = path.read_text()
        self.records.append((source, run))
        f = figures_in(source)
        if f.get("CRASH"):
            raise RuntimeError("the evaluator itself broke")
        status = f.get("STATUS", "ok")
        record = {"status": status, "target": "gfx950", "triton_version": "3.6.0", "file": str(path),
                  "shape": [1024, 1024, 512],
                  "message": f.get("MESSAGE")}
        if status == "ok":
            eff = f.get("EFF")  # the static objective follows it: estimated TFLOP/s = 1000 x EFF
            record["static"] = {"estimated_efficiency": eff, "estimated_tflops": None if eff is None else 1000 * eff,
                                "hot_loop_spills": f.get("SPILLS", 0),
                                "spills": f.get("SPILLS", 0), "registers": 128,
                                "shared_bytes": f.get("SHARED", 65536), "num_warps": 4,
                                "compiled_sha256": f.get("COMPILED"),  # `COMPILED = "x"`: what it compiles to
                                "throughput": {"ratio_error": FAKE_RATIO_ERROR}}
            if run:
                tflops = f.get("TFLOPS", 500.0 * f.get("SPEEDUP", 1.0))  # a separate timing: may drift
                record["runtime"] = {"correct": f.get("CORRECT", True), "tflops": tflops,
                                     "ratio_vs_vendor": 0.8 * f.get("SPEEDUP", 1.0), "device": "Fake GPU",
                                     "vendor": "fake BLAS", "shape": [512, 256, 128],
                                     "verdict": "wrong" if not f.get("CORRECT", True) else "ok"}
        return record

    def compare(self, candidate, incumbent, shape, min_gain):
        self.compares.append((candidate.read_text(), incumbent.read_text()))
        if self.interrupt and figures_in(candidate.read_text()).get("INTERRUPT"):
            raise KeyboardInterrupt
        speedup = figures_in(candidate.read_text()).get("SPEEDUP", 1.0) / \
            figures_in(incumbent.read_text()).get("SPEEDUP", 1.0)
        if speedup == 0:
            raise RuntimeError("the comparison broke")
        low, high = speedup * 0.99, speedup * 1.01
        vendor = 0.8 * figures_in(candidate.read_text()).get("SPEEDUP", 1.0)  # the start is 0.8x the vendor
        return {"speedup": speedup, "ci_low": low, "ci_high": high, "accepted": low > 1 + min_gain,
                "method": "fake interleaved A/B", "candidate_correct": True, "device": "Fake GPU",
                "shape": [512, 256, 128], "vs_vendor": {"vendor": "fake BLAS", "ratio": vendor,
                                                        "ci_low": vendor * 0.98, "ci_high": vendor * 1.02}}


class ScriptedProposer:
    """Proposes the kernels of `script`, one list per call, and remembers what the loop told it."""

    name = "scripted"

    def __init__(self, *script: list):
        self.script = list(script)
        self.contexts = []
        self.outcomes = []

    def propose(self, context):
        self.contexts.append(context)
        if not self.script:
            return []
        return [item if isinstance(item, FailedProposal) else Candidate(item, f"because {i}", f"idea {i}")
                for i, item in enumerate(self.script.pop(0), start=1)]

    def observe(self, candidate, outcome):
        self.outcomes.append((candidate.title, outcome.verdict))


def make_run(tmp_path, mode=STATIC, steps=2, candidates=1, base=BASE, **overrides) -> tuple[Ledger, RunConfig]:
    config = RunConfig(run_id="fake", target="gfx950", source_file="base.py", proposer="scripted", steps=steps,
                       candidates=candidates, min_gain=0.01, max_spills=0, seed=0, mode=mode,
                       objective=OBJECTIVES[mode], **overrides)
    record = FakeEvaluator().record(_written(tmp_path / "base" / KERNEL, base), run=mode == MEASURED)
    files, message = baseline_commit(config, base, record)
    return Ledger.create(tmp_path / "run", files, message), config


def _written(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def optimize(ledger, config, proposer, evaluator=None, budget=None, executor=None):
    evaluator = evaluator or FakeEvaluator()
    out = io.StringIO()
    result = Optimizer(ledger, config, proposer, executor or InlineExecutor(evaluator), budget or Budget(),
                       Progress(out, heartbeat=0)).run()
    return result, evaluator, out.getvalue()
