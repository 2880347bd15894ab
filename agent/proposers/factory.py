"""Building the proposer a run is configured with (the proposer modules import the interface from the package)."""
from __future__ import annotations

from pathlib import Path

from ..evaluation import STATIC
from ..prompt import Brief
from . import TUNE_CACHE, Proposer
from .ladder import LadderProposer, default_ladder_dir, load_stages
from .llm import DEFAULT_MODEL, LLMProposer, LLMSettings, endpoint_configured, stderr_line
from .manual import ManualSettings, ReplyFiles
from .tune import TuneCache, TuneProposer


class ProposerSetupError(ValueError):
    """A proposer that cannot be built from the run's configuration (no endpoint, no ladder directory)."""


def make_proposer(config, runs_dir: Path, dtype: str | None, progress=None, idle_steps: int = 0,
                  manual: ManualSettings | None = None) -> Proposer:
    """The proposer `config` (a RunConfig) names; `dtype` (the starting kernel's DTYPE) picks the ladder;
    `progress(message)` receives the proposer's progress lines (the LLM's requests and retries); `idle_steps`
    continues the LLM's count of steps without a usable reply (`agent.loop.idle_steps_so_far`); `manual` says
    where the manual proposer's prompt files go and how long it waits for replies."""
    if config.proposer == "tune":
        return TuneProposer(TuneCache(runs_dir / TUNE_CACHE), config.knob_choices)
    ladder = Path(config.ladder_dir) if config.ladder_dir else default_ladder_dir(config.target, dtype)
    if config.proposer == "ladder":
        if not ladder.is_dir():
            raise ProposerSetupError(f"no ladder directory {ladder}")
        return LadderProposer(ladder)
    stages = tuple(load_stages(ladder)) if ladder.is_dir() else ()
    brief = Brief(stages, static_objective=config.mode == STATIC)
    if config.proposer == "manual":
        if manual is None:
            raise ProposerSetupError("the manual proposer needs its prompt folder (ManualSettings)")
        settings = LLMSettings(model=config.model or "manual", base_url=None, retries=config.retries,
                               backoff=0.0, seed=config.seed, max_idle_steps=config.max_idle_steps)
        say = progress or stderr_line
        return LLMProposer(settings, brief, config.objective, progress=say, client=ReplyFiles(manual, say),
                           idle_steps=idle_steps, name="manual")
    if not endpoint_configured(config.base_url):
        raise ProposerSetupError("the llm proposer needs an endpoint: set OPENAI_API_KEY (and OPENAI_BASE_URL) "
                                 "or pass --base-url")
    settings = LLMSettings(model=config.model or DEFAULT_MODEL, base_url=config.base_url,
                           request_timeout=config.request_timeout, retries=config.retries,
                           backoff=config.retry_backoff, seed=config.seed, max_idle_steps=config.max_idle_steps)
    return LLMProposer(settings, brief, config.objective, progress=progress or stderr_line, idle_steps=idle_steps)
