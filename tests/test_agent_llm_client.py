"""The LLM channel without compiling anything: the client's named failures and the proposer's retries,
back-off, stop conditions and concurrent requests, all over real HTTP against the scripted local server."""
import json
import socket
import time

import pytest
from fakellm import FakeLLM, Raw, Reply, Stall, Status, completion

from agent.prompt import Brief
from agent.proposers import Attempt, Candidate, FailedProposal, ProposalContext
from agent.proposers.llm import LLMProposer, LLMSettings, commit_title, request_seed
from agent.proposers.llm_client import (
    EXIT_ENDPOINT_REFUSED,
    EXIT_ENDPOINT_UNAVAILABLE,
    ChatClient,
    EndpointRefused,
    EndpointUnavailable,
    retry_after_seconds,
)

KERNEL = '''"""A tiny contract file for the proposer's tests."""
TARGET = "gfx950"
DTYPE = "float16"
SHAPES = [(256, 256, 256)]
KNOBS = {"BLOCK_M": 128}


def launch(a, b, c, BLOCK_M):
    x = 1
    return x
'''
MESSAGES = [{"role": "user", "content": "hello"}]


def edit(value: int, why: str = "Change x") -> str:
    return f"{why} to {value}.\n<<<<<<< SEARCH\n    x = 1\n=======\n    x = {value}\n>>>>>>> REPLACE\n"


def context(count: int = 1, step: int = 1, history: tuple = ()) -> ProposalContext:
    return ProposalContext(target="gfx950", step=step, count=count, incumbent_source=KERNEL,
                           incumbent_record={"status": "ok", "static": {}}, last_record=None, last_source=None,
                           history=history, tried=frozenset())


def proposer(server: FakeLLM, lines: list, **settings) -> LLMProposer:
    options = {"retries": 3, "backoff": 0.01, "request_timeout": 2.0, **settings}
    return LLMProposer(LLMSettings(model="fake-model", base_url=server.base_url, **options), Brief(), "objective",
                       progress=lines.append)


def outcomes(proposal) -> list[str]:
    return [e["outcome"] for e in proposal.meta["exchanges"]]


# -- the client: every bad reply has a name ------------------------------------------------------------------

FULL = json.dumps(completion("hello", "m"))


@pytest.mark.parametrize("action, outcome, words", [
    (Raw(FULL[:45]), "truncated_json", "cut off after 45 characters"),
    (Raw("<html><body><h1>502 Bad Gateway</h1></body></html>", content_type="text/html"), "html_body",
     "HTML page instead of JSON"),
    (Raw("upstream connect error"), "not_json", "not JSON"),
    (Raw(json.dumps({"object": "chat.completion", "choices": []})), "no_choices", "no choices"),
    (Raw(json.dumps({"error": {"message": "overloaded"}})), "error_body", "overloaded"),
    (Reply(""), "empty_reply", "no text"),
    (Status(500), "http_500", "HTTP 500"),
    (Status(429, {"Retry-After": "7"}), "http_429", "HTTP 429"),
    (Stall(3.0), "timeout", "slow or stalled"),
])
def test_each_malformed_or_failed_reply_is_a_named_outcome(action, outcome, words):
    with FakeLLM([action]) as server:
        exchange = ChatClient("m", server.base_url, timeout=0.5).request(MESSAGES, seed=1)
    assert exchange.outcome == outcome and not exchange.ok
    assert words in exchange.message
    assert exchange.retry_after == (7.0 if outcome == "http_429" else None)


def test_a_good_reply_carries_text_and_usage():
    with FakeLLM([Reply("an idea", prompt_tokens=11, completion_tokens=4)]) as server:
        exchange = ChatClient("m", server.base_url, timeout=2).request(MESSAGES, seed=5)
        assert server.requests[0]["seed"] == 5 and server.requests[0]["model"] == "m"
    assert exchange.ok and exchange.content == "an idea"
    assert exchange.usage == {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15}


def test_a_dead_endpoint_is_a_connection_error():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    exchange = ChatClient("m", f"http://127.0.0.1:{port}/v1", timeout=2).request(MESSAGES, seed=0)
    assert exchange.outcome == "connection_error" and f"127.0.0.1:{port}" in exchange.message


@pytest.mark.parametrize("code, words", [(401, "refused the credentials"), (403, "refused access"),
                                         (404, "does not know the model")])
def test_credentials_refused_or_unknown_model_stop_at_once(code, words):
    with FakeLLM([Status(code, message="model 'nope' does not exist")]) as server, \
            pytest.raises(EndpointRefused) as exc:
        ChatClient("nope", server.base_url, timeout=2).request(MESSAGES, seed=0)
    assert exc.value.exit_code == EXIT_ENDPOINT_REFUSED == 4
    assert words in str(exc.value) and f"HTTP {code}" in str(exc.value) and "'nope'" in str(exc.value)


def test_retry_after_reads_seconds_and_http_dates_and_is_capped():
    assert retry_after_seconds("2.5") == 2.5
    assert retry_after_seconds("100000") == 60.0
    assert retry_after_seconds(None) is None and retry_after_seconds("soon") is None
    assert 0.0 <= retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") <= 60.0


# -- the proposer: retries, back-off, feedback ---------------------------------------------------------------


def test_failed_tries_are_retried_with_backoff_and_recorded():
    script = [Raw(FULL[:30]), Raw("<html>busy</html>", content_type="text/html"), Status(500), Reply(edit(3))]
    lines = []
    with FakeLLM(script) as server:
        (result,) = list(proposer(server, lines).propose(context()))
    assert isinstance(result, Candidate) and "    x = 3" in result.source
    assert outcomes(result) == ["truncated_json", "html_body", "http_500", "ok"]
    waits = [e.get("wait_s") for e in result.meta["exchanges"]]
    assert waits == [0.01, 0.02, 0.04, None]      # exponential back-off
    assert result.meta["usage"]["total_tokens"] == 150
    assert any("truncated_json" in ln and "retry 1/3 in 0.0 s" in ln for ln in lines)


def test_rate_limit_waits_as_long_as_retry_after_says():
    with FakeLLM([Status(429, {"Retry-After": "0.4"}), Reply(edit(3))]) as server:
        started = time.monotonic()
        (result,) = list(proposer(server, []).propose(context()))
        elapsed = time.monotonic() - started
        gap = server.log[1].arrived - server.log[0].finished
    assert outcomes(result) == ["http_429", "ok"] and result.meta["exchanges"][0]["wait_s"] == 0.4
    assert gap >= 0.35 and elapsed >= 0.4


def test_a_stalled_reply_times_out_and_is_retried():
    with FakeLLM([Stall(5.0), Reply(edit(3))]) as server:
        (result,) = list(proposer(server, [], request_timeout=0.5).propose(context()))
    assert outcomes(result) == ["timeout", "ok"]


@pytest.mark.parametrize("reply, feedback", [
    ("Make x bigger:\n```python\nx = 7\n```", "not a whole kernel file"),
    ("x should be 7", "no edit found"),
    ("Set x.\n<<<<<<< SEARCH\n    x = 0\n=======\n    x = 1\n>>>>>>> REPLACE\n", "already applied"),
])
def test_unusable_edits_are_answered_with_the_reason(reply, feedback):
    with FakeLLM([Reply(reply), Reply(edit(3))]) as server:
        (result,) = list(proposer(server, []).propose(context()))
        second = server.requests[1]["messages"]
    assert outcomes(result) == ["bad_edit", "ok"]
    assert second[-2] == {"role": "assistant", "content": reply}
    assert feedback in second[-1]["content"]


def test_retries_exhausted_give_a_failed_proposal_with_every_try():
    with FakeLLM([Status(500)] * 3) as server:
        (result,) = list(proposer(server, [], retries=2).propose(context()))
    assert isinstance(result, FailedProposal)
    assert result.reason.startswith("no applicable edit after 3 tries; last: http_500")
    assert outcomes(result) == ["http_500"] * 3


def test_a_non_retryable_client_error_is_not_retried():
    with FakeLLM([Status(400, message="context too long")]) as server:
        (result,) = list(proposer(server, []).propose(context()))
        assert len(server.requests) == 1
    assert isinstance(result, FailedProposal) and "http_400" in result.reason


def test_consecutive_steps_without_a_usable_reply_stop_the_run():
    with FakeLLM([], after=Status(503)) as server:
        llm = proposer(server, [], retries=1, max_idle_steps=2)
        first = list(llm.propose(context(step=1)))
        generator = llm.propose(context(step=2))
        second = next(generator)
        with pytest.raises(EndpointUnavailable, match="no usable reply .* in 2 consecutive step") as exc:
            next(generator)
    assert isinstance(first[0], FailedProposal) and isinstance(second, FailedProposal)
    assert exc.value.exit_code == EXIT_ENDPOINT_UNAVAILABLE == 5


def test_a_usable_reply_resets_the_idle_count():
    # Step 1 gets a reply whose edit never applies (usable, just wrong); step 2 fails outright: no stop.
    with FakeLLM([Reply("no edit"), Reply("still none")], after=Status(503)) as server:
        llm = proposer(server, [], retries=1, max_idle_steps=1)
        (failed,) = list(llm.propose(context(step=1)))
        assert isinstance(failed, FailedProposal) and llm.idle_steps == 0


def test_the_idle_count_rides_on_the_step_s_last_proposal_and_a_given_count_continues():
    # Step 1: one reply without an edit (usable) and one 503; the count (0) goes with whichever came last.
    with FakeLLM([Reply("no edit")], after=Status(503)) as server:
        llm = proposer(server, [], retries=0, max_idle_steps=3)
        first = list(llm.propose(context(count=2)))
        assert [p.meta.get("idle_steps") for p in first] == [None, 0]
        # A proposer built for a resumed run that had already gone 2 steps without a usable reply.
        resumed = LLMProposer(llm.settings, Brief(), "objective", progress=[].append, idle_steps=2)
        generator = resumed.propose(context(step=2))
        failed = next(generator)
        with pytest.raises(EndpointUnavailable, match="in 3 consecutive step"):
            next(generator)
    assert isinstance(failed, FailedProposal) and failed.meta["idle_steps"] == 3


def test_an_unexpected_error_in_a_conversation_is_one_failed_candidate():
    class BrokenClient:
        endpoint = "http://broken/v1"

        def request(self, messages, seed, label=""):
            raise ValueError("boom")

    llm = LLMProposer(LLMSettings(model="m", base_url=None), Brief(), "objective", progress=[].append,
                      client=BrokenClient())
    (result,) = list(llm.propose(context()))
    assert isinstance(result, FailedProposal) and result.reason == "proposer_error: ValueError: boom"
    assert "raise ValueError" in result.meta["traceback_tail"]


def test_refusal_mid_step_stops_the_proposer():
    with FakeLLM([Status(401)]) as server, pytest.raises(EndpointRefused):
        list(proposer(server, []).propose(context()))


# -- K requests per step -------------------------------------------------------------------------------------


def test_the_k_requests_of_a_step_differ_and_overlap_in_time():
    history = (Attempt(step=1, candidate=1, verdict="rejected", reason="slower", summary="tile 64",
                       source_sha256="", headline=""),)
    script = [Reply(edit(3, "Three"), delay=0.6), Reply(edit(4, "Four"), delay=0.6), Reply(edit(5, "Five"), delay=0.6)]
    with FakeLLM(script) as server:
        results = list(proposer(server, []).propose(context(count=3, step=2, history=history)))
        log = server.log
    assert len(log) == 3 and all(isinstance(r, Candidate) for r in results)
    # All three were in flight at once: each arrived before any answer finished.
    assert max(r.arrived for r in log) < min(r.finished for r in log)
    seeds = [r.body["seed"] for r in log]
    assert len(set(seeds)) == 3 and set(seeds) == {request_seed(0, 2, k) for k in (1, 2, 3)}
    tasks = sorted(r.messages[-1]["content"].split("## Task\n", 1)[1] for r in log)
    assert len(set(tasks)) == 3
    assert all(f"This is request {k} of 3" in t for k, t in zip((1, 2, 3), tasks))
    assert all("step 1.1: rejected - tile 64 - slower" in r.messages[-1]["content"] for r in log)
    assert sorted(r.meta["request"] for r in results) == [1, 2, 3]


def test_a_retry_is_told_what_its_siblings_proposed_meanwhile():
    lines: list[str] = []
    # Both requests are sent (each with the siblings it knew of: none) before the first edit comes back, and
    # the unusable reply waits until the proposer has received that edit, so its retry must mention it.
    script = [Reply(edit(3, "Unroll the loop"), gate=lambda: len(server.log) >= 2),
              Reply("no edit", gate=lambda: any(": received " in line for line in lines)),
              Reply(edit(4, "Pad the LDS"))]
    with FakeLLM(script) as server:
        results = list(proposer(server, lines, request_timeout=120.0).propose(context(count=2)))
        retry = server.requests[2]["messages"]
    assert sorted(r.title for r in results) == ["Pad the LDS to 4.", "Unroll the loop to 3."]
    assert retry[-1]["content"].startswith("Your reply could not be applied")
    assert "Meanwhile sibling requests of this step proposed: Unroll the loop to 3." in retry[-1]["content"]


def test_commit_titles_are_one_clean_line_never_cut_mid_word():
    assert commit_title("## **Use `async_copy`** for the B tile\nmore") == "Use async_copy for the B tile"
    long = commit_title("word " * 40)
    assert long.endswith(" ...") and len(long) <= 76 and "wor ..." not in long
    assert commit_title("") == "LLM edit"
