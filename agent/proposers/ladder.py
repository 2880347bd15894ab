"""The ladder proposer: the next hand-written reference stage of the target's ladder.

It needs neither a GPU nor an API key, so `nearpeak run` does real work on any machine, and it is the
yardstick an LLM run is compared against. The current stage is the incumbent's `STAGE` constant, or the
stage file whose source it matches; the proposal is the next stage not yet tried in this run.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evaluator.contract import read_constant
from evaluator.ladder import ladder_dirs, stage_paths

from ..source import declaration, module_docstring, sha256
from . import Candidate, ProposalContext


@dataclass(frozen=True)
class Stage:
    name: str            # "v03"
    path: Path
    technique: str
    summary: str         # first line of the docstring
    source: str


def default_ladder_dir(target: str, dtype: str | None = None) -> Path:
    """The target's ladder (evaluator.ladder.ladder_dirs) whose stages declare DTYPE `dtype`, else its first."""
    ladders = ladder_dirs(target)
    return next((d for d in ladders if dtype is not None and _ladder_dtype(d) == dtype), ladders[0])


def _ladder_dtype(directory: Path) -> str | None:
    paths = stage_paths(directory)
    return read_constant(paths[0], "DTYPE") if paths else None


def load_stages(directory: Path) -> list[Stage]:
    """The stages of a ladder directory, in order, with what their files declare."""
    stages = []
    for path in stage_paths(directory):
        text = path.read_text()
        doc = (module_docstring(text) or path.stem).strip().splitlines()[0]
        stages.append(Stage(name=declaration(text, "STAGE", path.stem[:3]), path=path,
                            technique=declaration(text, "TECHNIQUE", doc), summary=doc, source=text))
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
