"""Ideas before code: each step's ranked list of distinct ideas, asked for in one planning request.

With K > 1 candidates per step, K requests that each rank the ideas themselves converge on one idea. So a
step first asks once for a ranked list of distinct ideas, each tied to the evidence it addresses, with the
ideas already tried in the run listed; implementation request k is then given idea k and told what its
siblings implement. This module holds the records (`Idea`, `Plan`, `TriedIdea`), the reply format of the
planning request and its parser; the proposer sends the request, the loop keeps the plan in the ledger.

A planning reply that cannot be read (no JSON, JSON that does not parse, no usable idea) is a `PlanError`
with a named `cause`; after its retries the step falls back to unplanned requests and the ledger says why.
Pure: nothing here imports the rest of nearpeak.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

OK, FALLBACK = "ok", "fallback"
TITLE_LIMIT = 90
TEXT_LIMIT = 600
_FENCE = re.compile(r"```[ \t]*(?:json)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class Idea:
    """One idea of a step's plan; `number` is its rank (1 = most promising)."""

    number: int
    title: str
    evidence: str = ""     # the figure or section of the evaluation it addresses
    change: str = ""       # what to change in the kernel, in a sentence or two

    def to_dict(self) -> dict:
        return {"number": self.number, "title": self.title, "evidence": self.evidence, "change": self.change}

    @classmethod
    def from_dict(cls, data: dict) -> Idea:
        return cls(int(data.get("number", 0)), str(data.get("title", "")), str(data.get("evidence", "")),
                   str(data.get("change", "")))

    @property
    def label(self) -> str:
        return f"idea {self.number}: {self.title}"


@dataclass(frozen=True)
class Plan:
    """A step's ideas, or the fallback (no ideas) with the cause; `meta` and `artifacts` are the planning
    request's record (usage, tries; plan.prompt.md and plan.reply.md), kept once in the ledger."""

    ideas: tuple[Idea, ...]
    status: str = OK
    cause: str = ""
    dropped: int = 0       # ideas of the reply left out as repeats of another idea
    meta: dict = field(default_factory=dict)
    artifacts: dict[str, str] = field(default_factory=dict)

    def idea(self, slot: int) -> Idea | None:
        """The idea assigned to implementation request `slot` (1-based), if the plan has that many."""
        return self.ideas[slot - 1] if 0 < slot <= len(self.ideas) else None

    def to_dict(self) -> dict:
        """What every candidate commit of the step keeps (step.json `plan`)."""
        return {"status": self.status, "cause": self.cause, "dropped": self.dropped,
                "ideas": [i.to_dict() for i in self.ideas]}

    @classmethod
    def from_dict(cls, data: dict) -> Plan:
        return cls(tuple(Idea.from_dict(i) for i in data.get("ideas") or ()), data.get("status", OK),
                   data.get("cause", ""), int(data.get("dropped", 0)))


@dataclass(frozen=True)
class TriedIdea:
    """An idea an earlier candidate of the run implemented, and what became of it."""

    step: int
    candidate: int
    title: str
    verdict: str
    reason: str = ""


class PlanError(ValueError):
    """A planning reply that cannot be read; `cause` names the failure (no_json, bad_json, no_ideas)."""

    def __init__(self, cause: str, message: str):
        super().__init__(message)
        self.cause = cause


def reply_format(count: int) -> str:
    """How a planning reply must look: said in the prompt, read by `parse_plan`."""
    return (f"Reply with a ranked list of at least {count} distinct ideas, most promising first, as one JSON "
            "object in a ```json fenced block and nothing else needed around it:\n\n"
            "```json\n"
            '{"ideas": [\n'
            '  {"title": "short name of the change (at most ~10 words)",\n'
            '   "evidence": "the figure or section above it addresses, quoted (e.g. \\"hot loop: 32 s_barrier per '
            'iteration\\")",\n'
            '   "change": "what to change in the kernel, in one or two sentences"},\n'
            "  ...\n"
            "]}\n"
            "```\n\n"
            "Distinct means a different mechanism, not the same change with other numbers; do not list an idea "
            "the run already tried unless the evidence says why it would now work. Write no code: one "
            "implementation request per idea follows, each given one of your ideas.")


def parse_plan(reply: str, wanted: int) -> tuple[tuple[Idea, ...], int]:
    """The distinct ideas of a planning reply, ranked as the reply ranks them, and how many repeats were
    dropped. Raises PlanError when no idea can be read."""
    data = _json_in(reply)
    items = data.get("ideas") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise PlanError("no_ideas", 'the JSON has no "ideas" list')
    ideas: list[Idea] = []
    seen: set[str] = set()
    dropped = 0
    for item in items:
        if isinstance(item, str):
            item = {"title": item}
        if not isinstance(item, dict) or not str(item.get("title", "")).strip():
            continue
        title = _clip(str(item["title"]), TITLE_LIMIT)
        key = _key(title)
        if key in seen:
            dropped += 1
            continue
        seen.add(key)
        ideas.append(Idea(len(ideas) + 1, title, _clip(str(item.get("evidence", "")), TEXT_LIMIT),
                          _clip(str(item.get("change", "")), TEXT_LIMIT)))
    if not ideas:
        raise PlanError("no_ideas", "the reply's list holds no idea with a title")
    return tuple(ideas[:max(wanted, 1) * 2]), dropped


def _json_in(reply: str):
    """The JSON value of a reply: its first fenced block that parses, else the text from its first { or [."""
    blocks = _FENCE.findall(reply)
    error = None
    for block in blocks:
        try:
            return json.loads(block)
        except ValueError as exc:
            error = exc
    starts = [i for i in (reply.find("{"), reply.find("[")) if i >= 0]
    if starts:
        try:
            return json.JSONDecoder().raw_decode(reply[min(starts):])[0]
        except ValueError as exc:
            error = error or exc
    if error is not None:
        raise PlanError("bad_json", f"the JSON of the reply does not parse: {error}")
    raise PlanError("no_json", "the reply holds no JSON (expected a ```json block with an \"ideas\" list)")


def _key(title: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", title.lower()).split())


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def tried_section(tried: tuple[TriedIdea, ...]) -> str:
    """The ideas earlier candidates of the run implemented, with their verdicts (for the planning prompt)."""
    if not tried:
        return "- (none yet: this is the run's first planned step)"
    return "\n".join(f"- step {t.step}.{t.candidate}: {t.title} -> {t.verdict}" + (f" ({t.reason})" if t.reason else "")
                     for t in tried)
