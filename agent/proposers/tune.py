"""The tune proposer: sweep the numeric knobs a kernel declares in KNOB_CHOICES.

Each candidate is the incumbent with its `KNOBS = {...}` literal rewritten, nothing else. Configurations are
proposed nearest first (one knob changed, then two, ...), so a run walks downhill from the incumbent.

Results persist in a JSON cache shared by every run under the same runs directory, keyed by the kernel's
source hash (with the KNOBS value blanked, so all configurations of one kernel share it), the configuration,
the benchmark shape and the target. A configuration the cache knows this kernel failed or lost with is not
proposed again; known good ones are proposed before unknown ones, best first. `knob_candidates` is also what
the loop uses to add knob settings to every candidate of another proposer (`--tune-budget`).
"""
from __future__ import annotations

import fcntl
import itertools
import json
import os
import time
from pathlib import Path

from ..figures import figures
from ..source import declaration, knob_free_hash, replace_knobs, sha256
from . import Candidate, Outcome, ProposalContext

MAX_CONFIGS = 4096


class TuneCache:
    """A JSON file of evaluated configurations; every write is atomic (temp file + rename, under a lock)."""

    def __init__(self, path: Path):
        self.path = Path(path)

    @staticmethod
    def key(source: str, knobs: dict[str, int], shape, target: str) -> str:
        config = json.dumps(dict(sorted(knobs.items())), separators=(",", ":"))
        return f"{knob_free_hash(source)}|{config}|{'x'.join(map(str, shape))}|{target}"

    def load(self) -> dict[str, dict]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, json.JSONDecodeError):  # missing or unreadable: it only costs re-evaluations
            return {}
        return data if isinstance(data, dict) else {}

    def put(self, key: str, entry: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = self.load()
            data[key] = entry
            tmp = self.path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
            os.replace(tmp, self.path)


def _score(entry: dict) -> float:
    """Measured TFLOP/s when there are any, else the static objective (entries from before it: the efficiency)."""
    for key in ("tflops_measured", "estimated_tflops", "estimated_efficiency"):
        if entry.get(key) is not None:
            return float(entry[key])
    return 0.0


def _known_bad(entry: dict) -> bool:
    """A setting this kernel failed with (compile error, spills, wrong results) or lost with: never again."""
    return bool(entry.get("screened_out")) or entry.get("verdict") == "rejected"


def configurations(source: str, overrides: dict[str, list[int]] | None = None) -> list[dict[str, int]]:
    """Every setting of the knobs in KNOB_CHOICES (`overrides` replace or add choices) except the current one,
    nearest first (one knob changed, then two, ...)."""
    knobs = declaration(source, "KNOBS", {}) or {}
    choices = {**(declaration(source, "KNOB_CHOICES", {}) or {}), **(overrides or {})}
    names = [k for k in choices if k in knobs]
    configs = []
    for values in itertools.islice(itertools.product(*(choices[k] for k in names)), MAX_CONFIGS):
        config = {**knobs, **dict(zip(names, values))}
        distance = sum(config[k] != knobs[k] for k in names)
        if distance:
            configs.append((distance, config))
    configs.sort(key=lambda dc: dc[0])
    return [c for _, c in configs]


def knob_candidates(source: str, count: int, cache: TuneCache, target: str, skip: frozenset[str] | set[str],
                    overrides: dict[str, list[int]] | None = None) -> list[Candidate]:
    """Up to `count` knob settings of `source` worth evaluating: settings the cache rates well for this kernel
    first (best first), then unknown ones nearest first. Skipped: sources whose sha256 is in `skip` and settings
    the cache knows this kernel (same source hash, KNOBS aside) failed or lost with."""
    shape = (declaration(source, "SHAPES") or [None])[0]
    cached = cache.load()
    known_good, unknown = [], []
    for config in configurations(source, overrides):
        candidate_source = replace_knobs(source, config)
        if sha256(candidate_source) in skip:
            continue
        entry = cached.get(TuneCache.key(source, config, shape, target))
        if entry is None:
            unknown.append((config, candidate_source, None))
        elif not _known_bad(entry):
            known_good.append((config, candidate_source, entry))
    known_good.sort(key=lambda item: -_score(item[2]))
    return [_candidate(source, config, text, entry) for config, text, entry in (known_good + unknown)[:count]]


def _candidate(base: str, config: dict, text: str, entry: dict | None) -> Candidate:
    before = declaration(base, "KNOBS", {})
    changed = {k: v for k, v in config.items() if before.get(k) != v}
    change = ", ".join(f"{k} {before.get(k)} -> {v}" for k, v in changed.items())
    why = "the shared tune cache rates it well from an earlier run" if entry else "not evaluated before"
    return Candidate(source=text, rationale=f"Knob sweep: {change} ({why}).", title=f"tune {change}",
                     meta={"knobs": config, "changed": changed, "cache_hit": entry is not None})


def record_outcome(cache: TuneCache, candidate: Candidate, outcome: Outcome) -> None:
    """Remember how a knob setting fared, for every later run and step that meets the same kernel."""
    record = outcome.record
    shape = record.get("shape") or (declaration(candidate.source, "SHAPES") or [None])[0]
    f = figures(record)
    cache.put(TuneCache.key(candidate.source, candidate.meta["knobs"], shape, record.get("target")), {
        "status": f.status, "verdict": outcome.verdict, "reason": outcome.reason,
        "screened_out": outcome.screened_out,
        "estimated_efficiency": f.efficiency_estimate, "estimated_tflops": (record.get("static") or {}).get(
            "estimated_tflops"), "hot_loop_spills": f.hot_loop_spills,
        "tflops_measured": f.tflops_measured, "device": f.device, "recorded_at": time.time(),
    })


class TuneProposer:
    name = "tune"

    def __init__(self, cache: TuneCache, overrides: dict[str, list[int]] | None = None):
        self.cache = cache
        self.overrides = overrides or {}

    def propose(self, context: ProposalContext) -> list[Candidate]:
        return knob_candidates(context.incumbent_source, context.count, self.cache, context.target, context.tried,
                               self.overrides)

    def observe(self, candidate: Candidate, outcome: Outcome) -> None:
        record_outcome(self.cache, candidate, outcome)
