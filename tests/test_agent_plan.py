"""Ideas before code: the planning reply's parser, the llm proposer's planning request over real HTTP (tests/
fakellm.py) with its fallback, implementation requests assigned their ideas, and a dead endpoint on the first
request stopping at once (exit 5) while a connection lost later is retried."""
import socket
import time
from dataclasses import replace

import pytest
from agent_support import V00, nearpeak, need
from fakellm import FakeLLM, Reply, plan_text
from test_agent_llm_client import KERNEL, context, edit, proposer

from agent.ideas import FALLBACK, OK, PlanError, TriedIdea, parse_plan
from agent.prompt import Brief
from agent.proposers import Candidate, FailedProposal, PlanRequest
from agent.proposers.llm import LLMProposer, LLMSettings
from agent.proposers.llm_client import EXIT_ENDPOINT_UNAVAILABLE, EndpointUnreachable

# -- the parser ----------------------------------------------------------------------------------------------


def test_a_fenced_json_plan_is_read_in_rank_order_and_repeats_are_dropped():
    reply = plan_text("Stage A and B through LDS", "Persistent grid", "stage a and b through LDS!")
    ideas, dropped = parse_plan(reply, 2)
    assert [i.title for i in ideas] == ["Stage A and B through LDS", "Persistent grid"] and dropped == 1
    assert ideas[1].number == 2 and ideas[1].evidence == "evidence for Persistent grid"


def test_bare_json_and_a_plain_list_of_titles_are_read_too():
    ideas, _ = parse_plan('Plan: [{"title": "one"}, "two"] and then prose', 2)
    assert [i.title for i in ideas] == ["one", "two"]


@pytest.mark.parametrize("reply, cause", [("I would make the tiles larger.", "no_json"),
                                          ("```json\n{\"ideas\": [{\"title\": \"a\"},]\n```", "bad_json"),
                                          ('```json\n{"ideas": []}\n```', "no_ideas"),
                                          ('```json\n{"plan": "bigger tiles"}\n```', "no_ideas")])
def test_a_plan_that_cannot_be_read_names_its_cause(reply, cause):
    with pytest.raises(PlanError) as caught:
        parse_plan(reply, 2)
    assert caught.value.cause == cause


# -- the planning request ------------------------------------------------------------------------------------


def plan_request(count: int = 2) -> PlanRequest:
    tried = (TriedIdea(1, 2, "Halve BLOCK_K", "rejected", "estimated 500 < 589"),)
    return PlanRequest(context(count=count, step=2), count, tried)


def test_the_planning_request_lists_what_was_tried_and_its_ideas_reach_the_requests():
    lines: list[str] = []
    with FakeLLM([Reply(plan_text("Bigger tiles", "Eight waves")), Reply(edit(2, "Bigger tiles")),
                  Reply(edit(3, "Eight waves"))]) as server:
        llm = proposer(server, lines)
        plan = llm.plan(plan_request())
        results = list(llm.propose(replace(context(count=2, step=2), plan=plan)))
        bodies = server.requests
    assert plan.status == OK and [i.title for i in plan.ideas] == ["Bigger tiles", "Eight waves"]
    assert plan.meta["usage"]["total_tokens"] == 150 and plan.artifacts["plan.reply.md"].startswith("Here is")
    asked = bodies[0]["messages"][-1]["content"]
    assert "- step 1.2: Halve BLOCK_K -> rejected (estimated 500 < 589)" in asked and '{"ideas": [' in asked
    assert all(isinstance(r, Candidate) for r in results)
    tasks = sorted(b["messages"][-1]["content"].split("## Task\n", 1)[1] for b in bodies[1:])
    assert "implements idea 1: Bigger tiles" in tasks[0] and "- idea 2: Eight waves" in tasks[0]
    assert "implements idea 2: Eight waves" in tasks[1] and "- idea 1: Bigger tiles" in tasks[1]
    assert sorted(r.meta["idea"] for r in results) == [1, 2]


def test_a_malformed_plan_is_answered_with_the_error_then_falls_back_with_its_cause():
    with FakeLLM([Reply("Make the tiles bigger."), Reply("```json\n{\"ideas\": [\n```")]) as server:
        plan = proposer(server, [], retries=1).plan(plan_request())
        second = server.requests[1]["messages"]
    assert plan.status == FALLBACK and plan.ideas == () and plan.cause.startswith("bad_json:")
    assert [e["outcome"] for e in plan.meta["exchanges"]] == ["bad_plan", "bad_plan"]
    assert plan.meta["exchanges"][0]["cause"] == "no_json"
    assert "could not be read as a plan" in second[-1]["content"] and second[-2]["content"] == "Make the tiles bigger."
    # Unplanned, the requests fall back to choosing their own ideas.
    with FakeLLM([Reply(edit(2))]) as server:
        proposer(server, []).propose(context()).__next__()
        task = server.requests[0]["messages"][-1]["content"].split("## Task\n", 1)[1]
    assert "implements idea" not in task


# -- a dead endpoint -----------------------------------------------------------------------------------------


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_refused_connection_on_the_first_request_stops_at_once():
    url = f"http://127.0.0.1:{closed_port()}/v1"
    llm = LLMProposer(LLMSettings(model="m", base_url=url, retries=3, backoff=5.0), Brief(), "objective",
                      progress=[].append)
    started = time.monotonic()
    with pytest.raises(EndpointUnreachable) as caught:
        list(llm.propose(context(count=2)))
    assert time.monotonic() - started < 5.0   # no back-off: 3 retries would wait 5 + 10 + 20 s
    assert caught.value.exit_code == EXIT_ENDPOINT_UNAVAILABLE and "the run's first request" in str(caught.value)


def test_a_connection_lost_after_the_endpoint_answered_is_retried():
    with FakeLLM([Reply(edit(2))]) as server:
        llm = proposer(server, [], retries=1)
        (first,) = list(llm.propose(context()))
    # The server is gone now: later in the run, a refused connection is a transient failure, retried.
    (second,) = list(llm.propose(context(step=2)))
    assert isinstance(first, Candidate) and isinstance(second, FailedProposal)
    assert [e["outcome"] for e in second.meta["exchanges"]] == ["connection_error", "connection_error"]


@pytest.mark.slow
def test_nearpeak_run_against_a_dead_endpoint_exits_5_at_once_and_names_the_run(capsys, tmp_path):
    start = tmp_path / "v00.py"
    start.write_text(need(V00).read_text())
    url = f"http://127.0.0.1:{closed_port()}/v1"
    started = time.monotonic()
    code, out, err = nearpeak(capsys, "run", "--target", "gfx950", "--from", start, "--proposer", "llm",
                              "--base-url", url, "--runs-dir", tmp_path / "runs", "--run-id", "dead", "--steps", "3")
    assert code == 5, err
    assert time.monotonic() - started < 60   # the start kernel's evaluation, then no retries and no more steps
    run = tmp_path / "runs" / "dead"
    assert "endpoint unreachable: cannot reach" in err and f"nearpeak run --resume {run} --base-url URL" in err
    assert "all 3 steps done" not in out
