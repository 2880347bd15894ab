"""Search strategy: which kernels a run keeps (its population) and which of them each step builds on.

* greedy: one incumbent, the head of `main`; every candidate is its child, and the best candidate of a step
  that beats it (by the accept rule) replaces it.
* beam: the best `beam` accepted kernels by the run's figure of merit (in measured mode the kernel's speedup over
  the starting kernel, chained along its lineage from interleaved A/B speedups; the static estimate otherwise). Each step's candidates are children of parents drawn from the population: the
  first from the best member, the others weighted towards the best (weight 1/rank) so lesser lineages are
  explored too. A candidate that beats its own parent under the accept rule enters the population if it
  ranks among the best `beam`; `main` then points at the best member, whichever lineage it is on.

Everything here is a pure function of the ledger's contents and the run's seed, so a resumed run makes the
same choices as an uninterrupted one.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from .figures import figures

GREEDY, BEAM = "greedy", "beam"
STRATEGIES = (GREEDY, BEAM)
DEFAULT_BEAM = 4


@dataclass(frozen=True)
class Member:
    """An accepted kernel (or a candidate that may become one) as the search sees it."""

    sha: str
    step: int
    candidate: int
    merit: float                  # the run's figure of merit; larger is better across lineages
    score: tuple = ()             # the accept rule's score against its own parent; ranks one step's passers

    @property
    def label(self) -> str:
        return f"{self.step}.{self.candidate}"


def static_merit(record: dict) -> float:
    """The static figure of merit: estimated TFLOP/s where the evaluator gives it, else estimated efficiency."""
    static = record.get("static") or {}
    return float(static.get("estimated_tflops", figures(record).efficiency_estimate) or 0.0)


def chained_merit(parent_merit: float, comparison: dict | None) -> float:
    """The measured figure of merit: the parent's speedup over the starting kernel times this kernel's
    interleaved A/B speedup over its parent. Each factor was timed in one session against its own parent, so
    the product drifts far less than separate absolute TFLOP/s timings, which differ by several percent."""
    return parent_merit * float((comparison or {}).get("speedup") or 0.0)


def ranked(members: list[Member]) -> list[Member]:
    """Best first; ties go to the older kernel, so the order never depends on evaluation timing."""
    return sorted(members, key=lambda m: (-m.merit, m.step, m.candidate))


def default_strategy(candidates: int) -> str:
    return BEAM if candidates > 1 else GREEDY


@dataclass(frozen=True)
class Search:
    strategy: str
    beam: int
    seed: int

    def population(self, accepted: list[Member], main_head: str) -> list[Member]:
        """The current population, best first, from every accepted kernel of the run (root included)."""
        if self.strategy == GREEDY:
            return [m for m in accepted if m.sha == main_head]
        return ranked(accepted)[:self.beam]

    def parents(self, population: list[Member], step: int, count: int) -> list[Member]:
        """One parent per candidate of `step`: the best member first, then a draw weighted 1/rank."""
        if not population:
            return []
        rng = random.Random(f"{self.seed}:{step}")
        weights = [1.0 / rank for rank in range(1, len(population) + 1)]
        return [population[0]] + rng.choices(population, weights, k=max(count - 1, 0))

    def admit(self, population: list[Member], passers: list[Member]) -> list[Member]:
        """Which of a step's passing candidates (each beat its own parent) join the population."""
        if not passers:
            return []
        if self.strategy == GREEDY:
            return [max(passers, key=lambda m: (m.score, -m.candidate))]
        keep = {m.sha for m in ranked(population + passers)[:self.beam]}
        return [m for m in passers if m.sha in keep]
