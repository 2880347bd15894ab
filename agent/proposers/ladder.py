"""The ladder proposer: the next hand-written reference stage of the target's ladder.

It needs neither a GPU nor an API key, so `nearpeak run` does real work on any machine, and it is the
yardstick an LLM run is compared against. The current stage is the incumbent's `STAGE` constant, or the
stage file whose source it matches; the proposal is the next stage not yet tried in this run.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..source import declaration, module_docstring, sha256
from . import Candidate, ProposalContext

KERNELS_DIR = Path(__file__).resolve().parents[2] / "kernels"
# (target, operand dtype) -> ladder directory under kernels/; the first entry per target is its default.
LADDERS = {
    ("gfx950", "float16"): "gfx950/fp16",
    ("gfx950", "float8_e5m2"): "gfx950/bf8",
    ("sm90", "bfloat16"): "sm90/bf16",
    ("sm90", "float8_e4m3fn"): "sm90/fp8",
}


@dataclass(frozen=True)
class Stage:
    name: str            # "v03"
    path: Path
    technique: str
    summary: str         # first line of the docstring

    @property
    def source(self) -> str:
        return self.path.read_text()


def default_ladder_dir(target: str, dtype: str | None = None) -> Path:
    """The ladder for a target and operand dtype (falling back to the target's main ladder)."""
    rel = LADDERS.get((target, dtype)) or next(v for (t, _), v in LADDERS.items() if t == target)
    return KERNELS_DIR / rel


def load_stages(directory: Path) -> list[Stage]:
    """The stage files `vNN_*.py` of a ladder directory, in order."""
    stages = []
    for path in sorted(directory.glob("v[0-9][0-9]_*.py")):
        text = path.read_text()
        doc = (module_docstring(text) or path.stem).strip().splitlines()[0]
        stages.append(Stage(name=declaration(text, "STAGE", path.stem[:3]), path=path,
                            technique=declaration(text, "TECHNIQUE", doc), summary=doc))
    return stages


def current_stage(source: str, stages: list[Stage]) -> int:
    """Index of the incumbent's stage: its STAGE constant, else an identical stage file; -1 if neither."""
    names = [s.name for s in stages]
    stage = declaration(source, "STAGE")
    if stage in names:
        return names.index(stage)
    digest = sha256(source)
    for i, s in enumerate(stages):
        if sha256(s.source) == digest:
            return i
    return -1


class LadderProposer:
    name = "ladder"

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self.stages = load_stages(self.directory)

    def propose(self, context: ProposalContext) -> list[Candidate]:
        start = current_stage(context.incumbent_source, self.stages) + 1
        fresh = [s for s in self.stages[start:] if sha256(s.source) not in context.tried]
        return [self._candidate(stage) for stage in fresh[:context.count]]

    def _candidate(self, stage: Stage) -> Candidate:
        rationale = (f"Next reference stage of the ladder {self.directory.name}: {stage.path.name}.\n"
                     f"Technique: {stage.technique}.\n{stage.summary}")
        return Candidate(source=stage.source, rationale=rationale, title=f"{stage.path.stem} (ladder)",
                         meta={"stage": stage.name, "file": str(stage.path)})

    def observe(self, candidate, outcome) -> None:
        """The ladder is fixed; verdicts do not change what comes next."""
