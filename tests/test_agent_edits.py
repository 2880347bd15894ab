"""Edit formats: replies that apply (exactly or tolerantly), and replies that fail with messages a model can
act on."""
import pytest

from agent.edits import AlreadyApplied, EditError, apply_reply, contract_problem, rationale_of
from agent.source import declaration, knob_free_hash, replace_knobs

KERNEL = '''"""doc"""
TARGET = "gfx950"
DTYPE = "float16"
SHAPES = [(256, 256, 256)]
KNOBS = {"BLOCK_M": 128, "num_warps": 4}


def launch(a, b, c, BLOCK_M, num_warps):
    x = 1
    y = 2
    return x + y
'''
X_LINE = KERNEL.splitlines().index("    x = 1") + 1


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


def test_search_with_wrong_indentation_applies_reindented():
    # The model dropped the function's indentation and left trailing spaces: matched and re-indented.
    edit = apply_reply(block("x = 1   \ny = 2\n", "x = 1\nz = 5\ny = 2\n"), KERNEL)
    assert "    x = 1\n    z = 5\n    y = 2\n    return" in edit.source


def test_search_with_stray_blank_lines_applies():
    edit = apply_reply(block("\n    x = 1\n    y = 2\n\n", "\n    x = 9\n    y = 2\n\n"), KERNEL)
    assert "    x = 9\n    y = 2\n    return x + y" in edit.source


def test_a_block_that_elides_unchanged_lines_with_dots_applies_piece_by_piece():
    reply = block('KNOBS = {"BLOCK_M": 128, "num_warps": 4}\n...\n    x = 1\n',
                  'KNOBS = {"BLOCK_M": 64, "num_warps": 4}\n...\n    x = 5\n')
    edit = apply_reply(reply, KERNEL)
    assert declaration(edit.source, "KNOBS") == {"BLOCK_M": 64, "num_warps": 4} and "    x = 5\n" in edit.source
    assert edit.source.count("def launch") == 1
    with pytest.raises(EditError, match=r"SEARCH has 1 '\.\.\.' line\(s\) and REPLACE 0"):
        apply_reply(block("    x = 1\n...\n    y = 2\n", "    x = 5\n"), KERNEL)


def test_search_that_does_not_match_shows_the_closest_lines():
    with pytest.raises(EditError) as exc:
        apply_reply(block("    x = 10\n    y = 2\n", "    x = 3\n"), KERNEL)
    message = str(exc.value)
    assert message.startswith("block 1: the SEARCH part does not match")
    assert f"closest to kernel line {X_LINE}" in message and "Did you mean these lines" in message
    assert f"{X_LINE:4d}|     x = 1" in message and f"{X_LINE + 1:4d}|     y = 2" in message


def test_ambiguous_search_asks_for_more_context():
    source = KERNEL + "\ndef other():\n    x = 1\n"
    with pytest.raises(EditError, match="matches 2 places"):
        apply_reply(block("    x = 1\n", "    x = 5\n"), source)


def test_an_edit_already_applied_is_reported_as_such():
    done = KERNEL.replace("    x = 1\n", "    x = 3\n")
    with pytest.raises(AlreadyApplied, match=r"already applied: block 1 was already applied"):
        apply_reply(block("    x = 1\n", "    x = 3\n"), done)
    # One block new, one already there: applied, with a note.
    edit = apply_reply(block("    x = 1\n", "    x = 3\n") + block("    y = 2\n", "    y = 4\n"), done)
    assert "    y = 4" in edit.source
    assert edit.notes == ("block 1 was already applied (its REPLACE text is in the kernel)",)


@pytest.mark.parametrize("reply, message", [
    ("<<<<<<< SEARCH\n    x = 1\n>>>>>>> REPLACE\n", "has no '======='"),
    ("<<<<<<< SEARCH\n    x = 1\n=======\n    x = 2\n", "no '>>>>>>> REPLACE'"),
    ("    x = 2\n>>>>>>> REPLACE\n", "without an opening"),
    ("I would make the tile bigger.", "no edit found"),
    ("", "the reply is empty"),
    (block("", "x = 1\n"), "SEARCH part is empty"),
    ("```cuda\n__global__ void k() {}\n```\n", r"found fenced blocks \(```cuda\) but none marked ```python"),
])
def test_malformed_replies_say_what_is_wrong(reply, message):
    with pytest.raises(EditError, match=message):
        apply_reply(reply, KERNEL)


@pytest.mark.parametrize("fence", ["python", "py", "python3", ""])
def test_whole_file_reply_replaces_the_kernel_in_any_python_fence(fence):
    new = KERNEL.replace("x = 1", "x = 7")
    edit = apply_reply(f"Use seven.\n```{fence}\n{new}```\n", KERNEL)
    assert edit.format == "whole-file" and edit.source == new and edit.rationale == "Use seven."


def test_a_snippet_in_a_python_fence_is_not_taken_as_the_whole_file():
    with pytest.raises(EditError, match=r"not a whole kernel file: it lacks TARGET, DTYPE, SHAPES, KNOBS, def launch"):
        apply_reply("Make x seven:\n```python\nx = 7\n```\n", KERNEL)


def test_a_whole_file_that_changes_the_target_or_dtype_is_refused():
    assert "changes DTYPE from 'float16' to 'bfloat16'" in contract_problem(KERNEL.replace("float16", "bfloat16"),
                                                                             KERNEL)
    with pytest.raises(EditError, match="changes TARGET"):
        apply_reply(f"```python\n{KERNEL.replace('gfx950', 'sm90')}```", KERNEL)


def test_unified_diff_applies_by_context_not_line_numbers():
    diff = ("Fold y into x.\n```diff\n--- a/kernel.py\n+++ b/kernel.py\n@@ -40,3 +40,3 @@ def launch\n"
            "     x = 1\n-    y = 2\n+    y = 5\n     return x + y\n```\nThat is all.\n")
    edit = apply_reply(diff, KERNEL)
    assert edit.format == "unified-diff"
    assert "    x = 1\n    y = 5\n    return x + y" in edit.source
    assert edit.rationale == "Fold y into x.\nThat is all."


def test_unified_diff_whose_context_is_wrong_names_the_hunk():
    diff = "@@ -1,2 +1,2 @@\n     x = 100\n-    y = 2\n+    y = 5\n"
    with pytest.raises(EditError, match=r"hunk 1: the SEARCH part does not match.*Did you mean"):
        apply_reply(diff, KERNEL)


def test_prose_around_an_edit_is_the_rationale():
    reply = ("## Idea\nLarger tiles amortize the loads.\n\n"
             + block('KNOBS = {"BLOCK_M": 128, "num_warps": 4}\n', 'KNOBS = {"BLOCK_M": 256, "num_warps": 4}\n')
             + "\nThis should raise arithmetic intensity.\n")
    edit = apply_reply(reply, KERNEL)
    assert edit.rationale == "## Idea\nLarger tiles amortize the loads.\n\n\nThis should raise arithmetic intensity."


def test_result_must_be_valid_python_and_change_something():
    with pytest.raises(EditError, match=r"not valid Python: line 9"):
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
