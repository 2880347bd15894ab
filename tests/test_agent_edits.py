"""Edit formats: replies that apply, and replies that fail with messages a model can act on."""
import pytest

from agent.edits import EditError, apply_reply, rationale_of
from agent.source import declaration, knob_free_hash, replace_knobs

KERNEL = '''"""doc"""
KNOBS = {"BLOCK_M": 128, "num_warps": 4}


def launch(a, b, c, BLOCK_M, num_warps):
    x = 1
    y = 2
    return x + y
'''


def block(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


def test_search_replace_blocks_apply_in_order_and_keep_rationale():
    reply = ("Raise the tile and fold the constants.\n\n"
             + block('KNOBS = {"BLOCK_M": 128, "num_warps": 4}\n', 'KNOBS = {"BLOCK_M": 256, "num_warps": 4}\n')
             + block("    x = 1\n    y = 2\n", "    x = 3\n"))
    edit = apply_reply(reply, KERNEL)
    assert edit.format == "search-replace"
    assert declaration(edit.source, "KNOBS") == {"BLOCK_M": 256, "num_warps": 4}
    assert "    x = 3\n    return x + y" in edit.source
    assert edit.rationale == "Raise the tile and fold the constants."


def test_search_that_does_not_match_points_at_the_closest_line():
    with pytest.raises(EditError, match=r"block 1: the SEARCH part does not match.*closest to kernel line 6"):
        apply_reply(block("    x = 10\n", "    x = 3\n"), KERNEL)


def test_ambiguous_search_asks_for_more_context():
    source = KERNEL + "\ndef other():\n    x = 1\n"
    with pytest.raises(EditError, match="matches 2 places"):
        apply_reply(block("    x = 1\n", "    x = 5\n"), source)


@pytest.mark.parametrize("reply, message", [
    ("<<<<<<< SEARCH\n    x = 1\n>>>>>>> REPLACE\n", "has no '======='"),
    ("<<<<<<< SEARCH\n    x = 1\n=======\n    x = 2\n", "no '>>>>>>> REPLACE'"),
    ("    x = 2\n>>>>>>> REPLACE\n", "without an opening"),
    ("I would make the tile bigger.", "no edit found"),
    ("", "the reply is empty"),
    (block("", "x = 1\n"), "SEARCH part is empty"),
])
def test_malformed_replies_say_what_is_wrong(reply, message):
    with pytest.raises(EditError, match=message):
        apply_reply(reply, KERNEL)


def test_whole_file_reply_replaces_the_kernel():
    new = KERNEL.replace("x = 1", "x = 7")
    edit = apply_reply(f"Use seven.\n```python\n{new}```\n", KERNEL)
    assert edit.format == "whole-file" and edit.source == new and edit.rationale == "Use seven."


def test_whole_file_with_two_python_blocks_is_refused():
    with pytest.raises(EditError, match="found 2 ```python blocks"):
        apply_reply(f"```python\n{KERNEL}```\nand\n```python\n{KERNEL}```\n", KERNEL)


def test_result_must_be_valid_python_and_change_something():
    with pytest.raises(EditError, match=r"not valid Python: line 6"):
        apply_reply(block("    x = 1\n", "    x = = 1\n"), KERNEL)
    with pytest.raises(EditError, match="unchanged"):
        apply_reply(f"```python\n{KERNEL}```", KERNEL)


def test_rationale_skips_code_and_blocks():
    reply = "Why.\n```python\ncode\n```\nMore.\n" + block("a\n", "b\n") + "End."
    assert rationale_of(reply) == "Why.\nMore.\nEnd."


def test_knobs_rewrite_touches_only_the_dict():
    new = replace_knobs(KERNEL, {"BLOCK_M": 64, "num_warps": 8})
    assert declaration(new, "KNOBS") == {"BLOCK_M": 64, "num_warps": 8}
    assert new.replace('{"BLOCK_M": 64, "num_warps": 8}', '{"BLOCK_M": 128, "num_warps": 4}') == KERNEL
    assert knob_free_hash(new) == knob_free_hash(KERNEL)
