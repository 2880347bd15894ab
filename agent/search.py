"""Search strategy: which kernels a run keeps (its population) and which of them each step builds on.

* greedy: one incumbent, the head of `main`; every candidate is its child, and the best candidate of a step
  that beats it (by the accept rule) replaces it.
* beam: the best `beam` accepted kernels by the run's figure of merit (measured TFLOP/s in measured mode, the
  static estimate otherwise). Each step's candidates are children of parents drawn from the population: the
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


def merit(record: dict, measured: bool) -> float:
    """The figure of merit that ranks kernels of different lineages: measured TFLOP/s, else the static
    estimate (estimated TFLOP/s where the evaluator gives it, else estimated efficiency)."""
    f = figures(record)
    if measured:
        return float(f.tflops_measured or 0.0)
    static = record.get("static") or {}
    value = static.get("estimated_tflops", f.efficiency_estimate)
    return float(value or 0.0)


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

    @property
    def size(self) -> int:
        return 1 if self.strategy == GREEDY else self.beam

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

    def best(self, members: list[Member], newest_on_main: Member) -> Member:
        """The kernel `main` should hold: greedy keeps its newest incumbent; beam the best by merit."""
        return newest_on_main if self.strategy == GREEDY else ranked(members)[0]
