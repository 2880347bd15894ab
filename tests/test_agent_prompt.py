"""The prompt of a real gfx950 and a real sm90 kernel: the hot loop's matrix instructions, the right cycle
table, register split, occupancy limiter, grid against the CU/SM count, the ladder's lesson, the API sheet;
and the pure pieces (loop view, stale docstring figures, history diffs) on small inputs."""
import re
from pathlib import Path

import pytest

from agent.evaluation import OBJECTIVES, STATIC
from agent.prompt import Brief, Slot, stale_docstring_figures, system_message, user_message
from agent.proposers import Attempt, ProposalContext
from agent.proposers.ladder import load_stages
from evaluator.isa.common import Instruction
from evaluator.isa.loop_view import loop_view
from evaluator.targets import get_target

REPO = Path(__file__).resolve().parents[1]
GFX950 = REPO / "kernels" / "gfx950" / "fp16" / "v08_sliceMN.py"
SM90 = REPO / "kernels" / "sm90" / "bf16" / "v04_async_wgmma.py"


def prompt(path: Path, record: dict, history: tuple = ()) -> str:
    source = path.read_text()
    target = record["target"]
    stages = tuple(load_stages(path.parent))
    context = ProposalContext(target=target, step=2, count=3, incumbent_source=source, incumbent_record=record,
                              last_record=None, last_source=None, history=history, tried=frozenset())
    return user_message(context, Brief(stages, static_objective=True), Slot(2, 3), "static estimate rule")


def hot_loop_block(text: str) -> str:
    return text.split("## Its hot loop\n", 1)[1].split("```\n", 1)[1].split("\n```", 1)[0]


def test_gfx950_prompt_shows_its_mfmas_in_the_compressed_hot_loop_and_the_f16_cycle_table(static_eval):
    record = static_eval(str(GFX950))
    loop = record["static"]["hot_loop"]
    text = prompt(GFX950, record)
    view = hot_loop_block(text)
    # Every one of the loop's MFMAs is in the view (v08's loop is far longer than the view's limit), in order,
    # with the waits and LDS reads between them; the elided runs are counted.
    assert loop["instructions"] > 160 and view.count("v_mfma_f32_16x16x32_f16") == loop["mfma"] == 256
    assert view.count("s_waitcnt") == loop["s_waitcnt"] and view.count("ds_read") == loop["ds_read"]
    elided = sum(int(n) for n in re.findall(r"\.\.\. (\d+) other instruction\(s\) elided", view))
    kept = len([ln for ln in view.splitlines() if not ln.startswith("    ...")])
    assert kept + elided == loop["instructions"]
    assert "compressed: every matrix instruction" in text
    # The cost table rows are this kernel's own instruction and operand type, from the target object.
    table = get_target("gfx950").matrix_cycles
    assert f"v_mfma_f32_16x16x32_f16: {table['v_mfma_f32_16x16x32_f16']} cycles" in text
    assert "v_mfma_f32_32x32x16_f16 32" in text and "bf8" not in text.split("## Gluon API")[0]
    assert f"accumulator moves (register-file copies around the matrix unit, no arithmetic): " \
           f"{loop['accumulator_moves']} per iteration" in text
    static = record["static"]
    assert f"arch_vgprs {static['arch_vgprs']}, agprs {static['agprs']}" in text
    assert "limited by" in text and f"scratch_bytes {static['scratch_bytes']}" in text
    assert "launch grid [256, 1, 1] = 256 workgroups/CTAs for 256 CUs/SMs (1.00 per CU/SM)" in text
    assert "What the model leaves out" in text
    assert "gl.amd.cdna4.mfma(a, b, acc" in text  # 3.9 adds a cd_regclass argument
    assert "How the ladder applied its next technique after v08: v09" in text
    assert "This is request 2 of 3" in text


def test_sm90_prompt_shows_its_wgmmas_and_not_the_amd_table(static_eval):
    record = static_eval(str(SM90))
    loop = record["static"]["hot_loop"]
    text = prompt(SM90, record)
    view = hot_loop_block(text)
    assert loop["wgmma"] > 0 and view.count("HGMMA.") == loop["wgmma"]
    assert "(the whole loop)" in text and len(view.splitlines()) == loop["instructions"]
    matrix = text.split("## Matrix instructions of this kernel (bfloat16 on sm90)\n", 1)[1].split("\n## ", 1)[0]
    assert "HGMMA.64x" in matrix and "v_mfma" not in text
    assert get_target("sm90").matrix_cycles_note in matrix
    assert "registers per thread: " in text and "limited by" in text
    assert "launch grid" in text and "for 132 CUs/SMs" in text
    assert "gl.nvidia.hopper.warpgroup_mma(a, b, acc" in text
    assert "tma.async_copy_global_to_shared" in text or "tma.async_load" in text  # the name this release has


def test_history_entries_carry_their_diff_and_figures():
    record = {"status": "ok", "target": "gfx950", "static": {}}
    attempt = Attempt(step=1, candidate=2, verdict="rejected", reason="estimated efficiency lower",
                      summary="unroll by two", source_sha256="", headline="eff 0.2 static est.",
                      diff="@@ -1 +1 @@\n-x = 1\n+x = 2")
    text = prompt(GFX950, record, history=(attempt,))
    assert "- step 1.2: rejected - unroll by two - estimated efficiency lower [eff 0.2 static est.]" in text
    assert "```diff\n@@ -1 +1 @@\n-x = 1\n+x = 2\n```" in text


def test_stale_docstring_figures_are_flagged():
    source = '"""Uses 220 arch VGPRs and 40 SGPRs; 1,984 bytes of LDS."""\nx = 1\n'
    record = {"static": {"arch_vgprs": 256, "sgprs": 40, "shared_bytes": 1984}}
    assert stale_docstring_figures(source, record) == ["'220 arch VGPRs' (this evaluation: arch_vgprs 256)"]


def test_loop_view_is_whole_when_short_and_keeps_the_schedule_when_long():
    def ins(m: str) -> Instruction:
        return Instruction(m, "", 0)

    short = [ins("v_add"), ins("mma"), ins("v_add")]
    assert loop_view(short, lambda i: i.mnemonic == "mma", full_limit=5) == "v_add\nmma\nv_add"
    long = [ins("v_add")] * 3 + [ins("s_mov")] + [ins("mma")] + [ins("v_add")] * 2 + [ins("wait")]
    view = loop_view(long, lambda i: i.mnemonic in ("mma", "wait"), full_limit=5)
    assert view.splitlines() == ["    ... 4 other instruction(s) elided: 3 v_add, 1 s_mov", "mma",
                                 "    ... 2 other instruction(s) elided: 2 v_add", "wait"]


@pytest.mark.parametrize("target", ["gfx950", "sm90"])
def test_system_message_lists_every_edit_format(target):
    text = system_message(target, "the rule")
    assert all(name in text for name in ("search-replace", "unified-diff", "whole-file"))
    assert "commit subject" in text and "Keep the module docstring true" in text


@pytest.mark.parametrize("target", ["gfx950", "sm90"])
def test_the_example_prompts_state_the_accept_rule_the_loop_applies(target):
    """docs/examples/ is regenerated by its script (make_prompts.py) whenever the static rule changes."""
    text = (REPO / "docs" / "examples" / f"prompt_{target}.txt").read_text()
    assert OBJECTIVES[STATIC] in text.split("\n")[1]
