"""The manual proposer's transport alone (no compiles): a prompt file written once and self-contained, a reply
taken when it appears, heartbeats while waiting, the stop after --reply-wait, and a reply pasted on input."""
import os
import threading
import time

import pytest

from agent.proposers import EXIT_AWAITING_REPLIES, AwaitingReplies
from agent.proposers.manual import END_OF_PASTE, ManualSettings, ReplyFiles

MESSAGES = [{"role": "system", "content": "Reply in the format X."}, {"role": "user", "content": "## Task\nDo Y."}]


def files(tmp_path, lines, **options) -> ReplyFiles:
    settings = {"reply_wait": 5.0, "poll_s": 0.02, "heartbeat_s": 0.1, **options}
    return ReplyFiles(ManualSettings(tmp_path / "prompts", **settings), lines.append)


def test_the_prompt_is_written_once_and_a_reply_written_later_is_taken(tmp_path):
    lines: list[str] = []
    transport = files(tmp_path, lines)
    prompt, reply = transport.paths("step-1/req-2")
    timer = threading.Timer(0.4, lambda: reply.write_text("the reply\n"))
    timer.start()
    exchange = transport.request(MESSAGES, 7, "step-1/req-2")
    timer.join()
    assert exchange.ok and exchange.content == "the reply\n"
    text = prompt.read_text()
    assert prompt.name == "req-2.prompt.md" and reply.name == "req-2.reply.md" and prompt.parent.name == "step-1"
    assert str(reply) in text and "Reply in the format X." in text and "## Task\nDo Y." in text
    assert exchange.sent == text and exchange.notes["reply_file"] == str(reply)
    assert exchange.notes["estimated_tokens"]["prompt"] == round(len(text) / 4)
    assert any(line.startswith("... still waiting for") for line in lines)   # heartbeats while waiting
    # Asked again (a resumed run), the file is not rewritten even when the conversation text changed.
    prompt.write_text(text + "marker")
    again = transport.request(MESSAGES + [{"role": "user", "content": "other"}], 7, "step-1/req-2")
    assert again.content == "the reply\n" and prompt.read_text().endswith("marker")


@pytest.mark.parametrize("wait", [0.0, 0.3])
def test_no_reply_within_the_wait_stops_with_exit_6_naming_the_files(tmp_path, wait):
    transport = files(tmp_path, [], reply_wait=wait)
    started = time.monotonic()
    with pytest.raises(AwaitingReplies) as caught:
        transport.request(MESSAGES, 1, "step-2/plan")
    assert wait <= time.monotonic() - started < wait + 2
    prompt, reply = transport.paths("step-2/plan")
    assert caught.value.exit_code == EXIT_AWAITING_REPLIES and caught.value.waiting == ((str(prompt), str(reply)),)
    assert prompt.is_file() and "the planning request" in prompt.read_text()


def test_an_empty_reply_file_is_not_a_reply(tmp_path):
    transport = files(tmp_path, [], reply_wait=0.2)
    _, reply = transport.paths("step-1/req-1")
    reply.parent.mkdir(parents=True)
    reply.write_text("  \n")
    with pytest.raises(AwaitingReplies):
        transport.request(MESSAGES, 1, "step-1/req-1")


def test_a_reply_pasted_on_input_is_kept_in_the_reply_file(tmp_path):
    read, write = os.pipe()
    lines: list[str] = []
    with os.fdopen(read) as stdin:
        transport = ReplyFiles(ManualSettings(tmp_path / "prompts", reply_wait=5.0, interactive=True, poll_s=0.02),
                               lines.append, stdin=stdin)
        os.write(write, f"pasted line 1\npasted line 2\n{END_OF_PASTE}\n".encode())
        exchange = transport.request(MESSAGES, 1, "step-1/req-1")
    os.close(write)
    assert exchange.content == "pasted line 1\npasted line 2\n"
    assert transport.paths("step-1/req-1")[1].read_text() == exchange.content
    assert any("paste the reply" in line for line in lines)
