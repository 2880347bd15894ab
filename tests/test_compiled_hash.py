"""The compiled-kernel hash of the static record: sources that differ only in text that does not reach the
compiler share it; a change the compiler sees does not (real gfx950 compiles on the CPU)."""
import pytest
from agent_support import V00, need

from evaluator.api import evaluate_static
from evaluator.static import normalized_isa

AMD = """\t.text
\t.file\t1 "/tmp/x" "a.py"
\t.loc\t1 50 0 prologue_end             ; a.py:50:0
\ts_load_dwordx2 s[0:1], s[0:1], 0x0  ; encoding
\t.section\t.debug_str,"MS",@progbits,1
\t.asciz\t"a.py"
\t.section\t".note.GNU-stack","",@progbits
\t.amdgpu_metadata
  .name: gemm_kernel
"""
SASS = "        /*0010*/                   S2R R0, SR_TID.X ;                 /* 0x0000000000007919 */\n"


def test_normalized_isa_keeps_instructions_and_drops_source_locations():
    text = normalized_isa(AMD)
    assert "s_load_dwordx2 s[0:1], s[0:1], 0x0" in text and ".name: gemm_kernel" in text
    assert "a.py" not in text and ".loc" not in text and "encoding" not in text
    assert normalized_isa(AMD.replace("a.py", "b.py").replace(" 50 0", " 53 0")) == text
    assert normalized_isa(SASS) == "S2R R0, SR_TID.X"


def _twin(source: str) -> str:
    """The same kernel in other words: a longer docstring, a comment, blank lines and a renamed local."""
    twin = source.replace('"""v00 naive:', '"""v00 naive, re-documented:\n\nMore words here.\n', 1)
    twin = twin.replace("    pid = gl.program_id(0)\n", "    # which output tile\n\n    tile = gl.program_id(0)\n", 1)
    return twin.replace("pid // num_pid_n", "tile // num_pid_n").replace("pid % num_pid_n", "tile % num_pid_n")


def test_text_only_changes_share_the_hash_and_a_knob_change_does_not(tmp_path):
    source = need(V00).read_text()
    twin = _twin(source)
    assert twin != source and "tile = gl.program_id(0)" in twin
    other = source.replace('"BLOCK_K": 64', '"BLOCK_K": 32', 1)
    hashes = []
    for name, text in (("a.py", source), ("b.py", twin), ("c.py", other)):
        path = tmp_path / name
        path.write_text(text)
        record = evaluate_static(path)
        assert record["status"] == "ok", record
        hashes.append(record["static"]["compiled_sha256"])
    assert hashes[0] == hashes[1] and len(hashes[0]) == 64
    assert hashes[2] != hashes[0]


