"""What an evaluation is asked to do: one typed request along the whole evaluation path.

A `Problem` is what is being optimised: the objective shapes with their weights, the shapes every kernel
must also be correct on, and the timing that decides a comparison. An optimisation run fixes one when it is
created (run.json) so that no candidate can change it by editing its own SHAPES; a caller without a
problem gets the kernel's own declarations (its first SHAPES entry is the objective).

An `EvalRequest` carries the problem and the rest of one evaluation's settings (target, knobs, seed, GPU
stage, budget) from `evaluator.api` through the sandbox into the stage bodies, as one JSON-ready record
instead of a growing list of positional parameters.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace

from .errors import UsageError

Shape = tuple[int, int, int]
TIMINGS = ("eager", "graph")   # per-call device events, or CUDA-graph replay (GPU time without host launch)
DEFAULT_TIMING = "eager"


def parse_shape(text: str) -> tuple[Shape, float]:
    """`M,N,K` or `M,N,K:WEIGHT` (also `MxNxK`) -> (shape, weight); UsageError when malformed."""
    body, _, weight_text = text.strip().partition(":")
    parts = body.replace("x", ",").split(",")
    try:
        shape = tuple(int(p) for p in parts)
        weight = float(weight_text) if weight_text else 1.0
    except ValueError:
        raise UsageError(f"--shape {text!r}: expected M,N,K or M,N,K:WEIGHT with whole numbers") from None
    if len(shape) != 3 or min(shape) <= 0:
        raise UsageError(f"--shape {text!r}: expected three positive dimensions M,N,K")
    if not (weight > 0 and math.isfinite(weight)):
        raise UsageError(f"--shape {text!r}: the weight must be a positive number")
    return shape, weight  # type: ignore[return-value]


@dataclass(frozen=True)
class ObjectiveShape:
    """One shape the objective is taken at, and its weight in the weighted geometric mean."""

    shape: Shape
    weight: float = 1.0

    def label(self) -> str:
        text = "x".join(str(d) for d in self.shape)
        return text if self.weight == 1.0 else f"{text}:{self.weight:g}"


@dataclass(frozen=True)
class Problem:
    """The problem a run owns: objective shapes (weighted), shapes to stay correct on, the deciding timing."""

    objective: tuple[ObjectiveShape, ...]
    check_shapes: tuple[Shape, ...] = ()
    timing: str = DEFAULT_TIMING

    def __post_init__(self):
        if not self.objective:
            raise UsageError("a problem needs at least one objective shape")
        if self.timing not in TIMINGS:
            raise UsageError(f"timing {self.timing!r}: expected one of {', '.join(TIMINGS)}")

    @classmethod
    def of(cls, shapes: Iterable[tuple[Sequence[int], float]], check_shapes: Iterable[Sequence[int]] = (),
           timing: str = DEFAULT_TIMING) -> Problem:
        objective = tuple(ObjectiveShape(tuple(int(d) for d in s), float(w)) for s, w in shapes)  # type: ignore[arg-type]
        checks = tuple(tuple(int(d) for d in s) for s in check_shapes)
        return cls(objective, tuple(dict.fromkeys(c for c in checks if c not in {o.shape for o in objective})),
                   timing)

    @property
    def shapes(self) -> tuple[Shape, ...]:
        """Every shape of the problem, objective first: what a kernel must be able to run."""
        return tuple(o.shape for o in self.objective) + self.check_shapes

    def describe(self) -> str:
        shapes = ", ".join(o.label() for o in self.objective)
        checks = f"; also correct on {', '.join('x'.join(map(str, s)) for s in self.check_shapes)}" \
            if self.check_shapes else ""
        mean = "weighted geometric mean over " if len(self.objective) > 1 else "at "
        return f"{mean}{shapes}{checks}; {self.timing} timing decides"

    def to_dict(self) -> dict:
        return {"objective": [{"shape": list(o.shape), "weight": o.weight} for o in self.objective],
                "check_shapes": [list(s) for s in self.check_shapes], "timing": self.timing}

    @classmethod
    def from_dict(cls, data: dict) -> Problem:
        return cls.of([(o["shape"], o.get("weight", 1.0)) for o in data["objective"]],
                      data.get("check_shapes") or (), data.get("timing", DEFAULT_TIMING))


def weighted_geomean(values: Sequence[float], weights: Sequence[float]) -> float:
    """exp(sum w log v / sum w): the objective over a problem's shapes (every value must be positive)."""
    total = sum(weights)
    return math.exp(sum(w * math.log(v) for v, w in zip(values, weights)) / total)


@dataclass(frozen=True)
class EvalRequest:
    """One evaluation's settings, from `evaluator.api` down to the sandboxed stage bodies (JSON-ready).

    `shape` is a single shape asked for by hand (`nearpeak eval --shape`); `problem` the run's problem, which
    wins when both are given. Neither: the kernel's own first SHAPES entry.
    """

    target: str | None = None
    shape: Shape | None = None
    problem: Problem | None = None
    knobs: dict = field(default_factory=dict)
    run: bool | None = None          # GPU stage: True required, False never, None when a GPU of the target is here
    seed: int | None = None          # None: drawn fresh for this evaluation
    profile: bool = False
    timeout_s: float | None = None   # one budget for every stage of this evaluation
    dump_dir: str | None = None
    min_gain: float = 0.0            # comparisons: accept only when the interval's low end clears 1 + min_gain
    ab_rounds: int = 20              # comparisons: A/B rounds per shape (the bootstrap's units)
    ab_calls: int = 10               # comparisons: calls per side per round (or per captured graph)

    @classmethod
    def build(cls, request: EvalRequest | None, fields: dict) -> EvalRequest:
        """`request`, or one made of keyword `fields` (a convenience for scripts and tests), or both merged."""
        if request is not None and not isinstance(request, EvalRequest):
            raise TypeError(f"expected an EvalRequest, got {request!r} (pass target=... by keyword)")
        fields = {k: v for k, v in fields.items() if v is not None}
        if fields.get("shape") is not None:
            fields["shape"] = tuple(int(d) for d in fields["shape"])
        if fields.get("dump_dir") is not None:
            fields["dump_dir"] = str(fields["dump_dir"])
        return request.with_(**fields) if request is not None else cls(**fields)

    def with_(self, **changes) -> EvalRequest:
        return replace(self, **changes)

    def shapes_for(self, benchmark_shape: Shape) -> tuple[ObjectiveShape, ...]:
        """The objective shapes of this request for a kernel whose own benchmark shape is `benchmark_shape`."""
        if self.problem is not None:
            return self.problem.objective
        return (ObjectiveShape(tuple(self.shape or benchmark_shape)),)  # type: ignore[arg-type]

    def required_shapes(self) -> tuple[Shape, ...]:
        """Shapes the kernel must be able to run beyond its own SHAPES (the problem's, or the asked shape)."""
        if self.problem is not None:
            return self.problem.shapes
        return (tuple(self.shape),) if self.shape else ()  # type: ignore[return-value]

    @property
    def timing(self) -> str:
        return self.problem.timing if self.problem else DEFAULT_TIMING

    def to_dict(self) -> dict:
        data = asdict(self)
        data["shape"] = list(self.shape) if self.shape else None
        data["problem"] = self.problem.to_dict() if self.problem else None
        return data

    @classmethod
    def from_dict(cls, data: dict) -> EvalRequest:
        data = dict(data)
        data["shape"] = tuple(data["shape"]) if data.get("shape") else None
        data["problem"] = Problem.from_dict(data["problem"]) if data.get("problem") else None
        data["knobs"] = dict(data.get("knobs") or {})
        return cls(**data)
