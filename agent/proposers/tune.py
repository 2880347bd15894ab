"""The tune proposer: sweep the numeric knobs a kernel declares in KNOB_CHOICES.

Each candidate is the incumbent with its `KNOBS = {...}` literal rewritten, nothing else. Configurations are
proposed nearest first (one knob changed, then two, ...), so a run walks downhill from the incumbent.

Results persist in a JSON cache shared by every run under the same runs directory, keyed by the kernel's
source hash (with the KNOBS value blanked, so all configurations of one kernel share it), the configuration,
the benchmark shape and the target. A configuration the cache knows to fail is not proposed again; known
good ones are proposed before unknown ones, best first.
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


class TuneProposer:
    name = "tune"

    def __init__(self, cache: TuneCache):
        self.cache = cache

    def configurations(self, source: str) -> list[dict[str, int]]:
        """Every configuration from KNOB_CHOICES except the current one, nearest first."""
        knobs = declaration(source, "KNOBS", {}) or {}
        choices = declaration(source, "KNOB_CHOICES", {}) or {}
        names = [k for k in choices if k in knobs]
        configs = []
        for values in itertools.islice(itertools.product(*(choices[k] for k in names)), MAX_CONFIGS):
            config = {**knobs, **dict(zip(names, values))}
            distance = sum(config[k] != knobs[k] for k in names)
            if distance:
                configs.append((distance, config))
        configs.sort(key=lambda dc: dc[0])
        return [c for _, c in configs]

    def propose(self, context: ProposalContext) -> list[Candidate]:
        source = context.incumbent_source
        shape = (declaration(source, "SHAPES") or [None])[0]
        cached = self.cache.load()
        known_good, unknown = [], []
        for config in self.configurations(source):
            candidate_source = replace_knobs(source, config)
            if sha256(candidate_source) in context.tried:
                continue
            entry = cached.get(TuneCache.key(source, config, shape, context.target))
            if entry is None:
                unknown.append((config, candidate_source, None))
            elif not entry.get("screened_out"):
                known_good.append((config, candidate_source, entry))
        known_good.sort(key=lambda item: -_score(item[2]))
        chosen = (known_good + unknown)[:context.count]
        return [self._candidate(source, config, text, entry) for config, text, entry in chosen]

    def _candidate(self, incumbent: str, config: dict, text: str, entry: dict | None) -> Candidate:
        before = declaration(incumbent, "KNOBS", {})
        changed = {k: v for k, v in config.items() if before.get(k) != v}
        change = ", ".join(f"{k} {before.get(k)} -> {v}" for k, v in changed.items())
        why = ("the shared tune cache rates it well from an earlier run" if entry else "not evaluated before")
        return Candidate(source=text, rationale=f"Knob sweep: {change} ({why}).", title=f"tune {change}",
                         meta={"knobs": config, "changed": changed, "cache_hit": entry is not None})

    def observe(self, candidate: Candidate, outcome: Outcome) -> None:
        record = outcome.record
        shape = record.get("shape") or (declaration(candidate.source, "SHAPES") or [None])[0]
        target = record.get("target")
        f = figures(record)
        self.cache.put(TuneCache.key(candidate.source, candidate.meta["knobs"], shape, target), {
            "status": f.status, "verdict": outcome.verdict, "reason": outcome.reason,
            "screened_out": outcome.screened_out,
            "estimated_efficiency": f.efficiency_estimate,
            "estimated_tflops": (record.get("static") or {}).get("estimated_tflops"), "hot_loop_spills": f.hot_loop_spills,
            "tflops_measured": f.tflops_measured, "device": f.device, "recorded_at": time.time(),
        })
