"""The sm90 static report agrees with the SASS and ptxas output it was read from."""
from __future__ import annotations

import pytest
from conftest import TEST_KERNELS

from evaluator.compile import compile_candidate
from evaluator.contract import load_candidate
from evaluator.targets import get_target
from evaluator.targets.nvidia import sass

pytestmark = pytest.mark.compiler  # reads real compiler output: CI runs it on two Triton releases

SM90 = get_target("sm90")


@pytest.fixture(scope="module")
def small():
    module, spec = load_candidate(TEST_KERNELS / "small_sm90.py")
    kernels = compile_candidate(module, spec, SM90)
    from evaluator.static import analyze

    return kernels[0], analyze(kernels, SM90)


def test_wgmma_count_equals_hgmma_lines_in_sass(small):
    kernel, report = small
    lines = [ln for ln in kernel.asm["sass"].splitlines() if " HGMMA." in ln]
    assert report["wgmma_count"] == len(lines) > 0
    assert report["hmma_count"] == 0
    assert all(s.startswith("HGMMA.64x64x16") for s in report["matrix_shape"])


def test_registers_and_spills_from_ptxas(small):
    _, report = small
    assert 0 < report["registers"] <= 255
    assert report["spill_store_bytes"] == report["spill_load_bytes"] == 0 and report["hot_loop_spills"] == 0
    assert report["shared_bytes"] == 2 * 64 * 64 * 2


def test_hot_loop_holds_the_wgmma_and_its_loads(small):
    _, report = small
    loop = report["hot_loop"]
    assert loop["wgmma"] > 0 and loop["global_load"] > 0 and loop["shared_store"] > 0
    assert 0 < report["estimated_efficiency"] <= 1


def test_ptxas_report_parser():
    text = ("ptxas info    : Function properties for k\n    24 bytes stack frame, 16 bytes spill stores, "
            "8 bytes spill loads\nptxas info    : Used 168 registers, used 1 barriers")
    usage = sass.parse_ptxas_report(text)
    assert (usage.registers, usage.stack_frame_bytes, usage.spill_store_bytes, usage.spill_load_bytes) == (168, 24, 16, 8)


def test_hgmma_cycles_follow_the_instruction_shape():
    from evaluator.isa.common import Instruction

    assert sass.hgmma_cycles(Instruction("HGMMA.64x128x16.F32.BF16", "", 1)) == 64
    assert sass.hgmma_cycles(Instruction("HGMMA.64x256x32.F32.E4M3.E4M3", "", 1)) == 128


def test_ptxas_is_the_one_triton_assembles_the_arch_with():
    from triton.backends.nvidia.compiler import get_ptxas

    assert sass.ptxas_for("sm_90a") == get_ptxas(90).path
    assert sass.ptxas_for("sm_100a") == get_ptxas(100).path


def test_ptxas_that_rejects_the_ptx_raises_with_its_message():
    from evaluator.errors import CompileFailure

    ptx = ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k() { not_an_instruction; }\n"
    with pytest.raises(CompileFailure, match="ptxas .* failed on the kernel's PTX: .*not_an_instruction|syntax"):
        sass.ptxas_resource_usage(ptx, "sm_90a")


def test_a_failing_ptxas_makes_a_compile_error_record_not_zero_registers(tmp_path, monkeypatch):
    """The silent failure of Triton 3.9 with the Hopper ptxas (PTX of a newer ISA) once gave 0 registers, 0 spills."""
    from evaluator.api import evaluate_static

    fake = tmp_path / "ptxas"
    fake.write_text("#!/bin/sh\necho \"ptxas fatal   : Unsupported .version 9.4; current version is '8.7'\" >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sass, "ptxas_for", lambda arch: str(fake))
    sass.ptxas_resource_usage.cache_clear()  # the module fixture's report of the same PTX is cached
    try:
        record = evaluate_static(TEST_KERNELS / "small_sm90.py")
    finally:
        sass.ptxas_resource_usage.cache_clear()
    assert record["status"] == "compile_error" and "static" not in record
    assert "Unsupported .version 9.4" in record["message"]
