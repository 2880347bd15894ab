"""A run's configuration: fixed when the run is created, committed as run.json in its first commit."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields

RUN_SCHEMA = "nearpeak.run/1"


@dataclass(frozen=True)
class RunConfig:
    run_id: str
    target: str
    source_file: str               # where the starting kernel came from (informational)
    proposer: str                  # llm | ladder | tune
    steps: int
    candidates: int                # candidates proposed and evaluated per step
    min_gain: float                # accept only when the speedup's lower bound exceeds 1 + min_gain
    max_spills: int                # hot-loop spill instructions allowed by the static screen
    seed: int
    mode: str                      # "measured" (GPU of the target present) or "static"
    objective: str                 # the accept rule in words
    model: str | None = None
    base_url: str | None = None
    request_timeout: float = 120.0
    retries: int = 3
    retry_backoff: float = 2.0
    max_idle_steps: int = 3        # consecutive steps without a usable LLM reply before the run stops
    ladder_dir: str | None = None
    max_tokens: int | None = None
    max_wall: float | None = None
    candidate_timeout: float = 600.0    # seconds per sandboxed evaluation or comparison of one candidate
    strategy: str = "greedy"       # greedy | beam (agent/search.py)
    beam: int = 4                  # population size of the beam strategy
    tune_budget: int = 0           # knob settings tried with every candidate of a non-tune proposer
    knob_choices: dict | None = None   # --knob overrides of the kernels' KNOB_CHOICES
    profile: bool = True           # profile each measured candidate's matrix-unit efficiency (not used to judge)
    problem: dict | None = None    # evaluator.request.Problem.to_dict(): the run's shapes, weights and timing
    aa_check: dict | None = None   # measured runs: the start kernel against its own copy, before any step
    created_utc: str = ""
    triton_version: str = ""
    schema: str = RUN_SCHEMA

    def run_problem(self):
        """The run's problem (evaluator.request.Problem); None for runs made before runs owned one."""
        from evaluator.request import Problem

        return Problem.from_dict(self.problem) if self.problem else None

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes) -> RunConfig:
        data = json.loads(text)
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})
