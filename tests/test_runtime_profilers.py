"""Profiler commands and parsers: ncu and rocprofv3 outputs from fixture files."""
from __future__ import annotations

from pathlib import Path

import pytest

from evaluator.targets import get_target
from evaluator.targets.amd import rocprof
from evaluator.targets.nvidia import ncu

GFX950 = get_target("gfx950")

FIXTURES = Path(__file__).parent / "fixtures"


def test_ncu_command_leaves_clocks_alone_and_filters_kernels():
    cmd = ncu.ncu_command("k.py", ["gemm_kernel", "helper"], (4096, 4096, 4096), {"BLOCK_K": 64}, 3)
    assert cmd[:3] == ["ncu", "--clock-control", "none"]
    assert cmd[cmd.index("-k") + 1] == "regex:^(gemm_kernel|helper)$"
    assert cmd[cmd.index("--metrics") + 1].split(",") == list(ncu.NCU_METRICS)
    assert "--csv" in cmd
    tail = cmd[cmd.index("-m"):]
    assert tail[:3] == ["-m", "evaluator.profilers.ncu_target", "k.py"]
    assert tail[tail.index("--shape") + 1:tail.index("--shape") + 4] == ["4096", "4096", "4096"]


def test_ncu_values_parse_thousands_separators_and_missing_values():
    assert ncu.parse_value("1,048,576") == 1048576.0
    assert ncu.parse_value("87.5") == 87.5
    assert ncu.parse_value("9,00") == 9.0
    assert ncu.parse_value("n/a") is None


def test_ncu_details_csv_gives_one_entry_per_launch():
    launches = ncu.parse_ncu_csv((FIXTURES / "ncu_sm90_v00_details.csv").read_text())
    assert [x["id"] for x in launches] == [0, 1]
    assert launches[0]["kernel"] == "gemm_kernel"
    assert launches[1]["metrics"][ncu.TENSOR_PIPE] == 31.96
    assert launches[0]["units"][ncu.REGISTERS] == "register/thread"
    summary = ncu.summarize_ncu(launches)
    assert summary["tensor_pipe_active_pct"] == pytest.approx((31.42 + 31.96) / 2)
    assert summary["efficiency"] == pytest.approx(summary["tensor_pipe_active_pct"] / 100)
    assert summary["registers_per_thread"] == 168 and summary["matrix_path"] == "mma.sync or none"
    assert summary["achieved_occupancy_pct"] == pytest.approx(11.89)


def test_ncu_raw_csv_with_units_row():
    launches = ncu.parse_ncu_csv((FIXTURES / "ncu_sm90_wgmma_raw.csv").read_text())
    assert len(launches) == 1 and launches[0]["units"][ncu.TENSOR_PIPE] == "%"
    summary = ncu.summarize_ncu(launches)
    assert summary["gmma_instructions"] == 1048576 and summary["matrix_path"] == "wgmma"
    assert summary["tensor_pipe_active_pct"] == 78.5


def test_ncu_output_without_a_table_parses_to_nothing():
    assert ncu.parse_ncu_csv("==PROF== ERR_NVGPUCTRPERM - no permission\n") == []


def test_run_ncu_without_ncu_reports_instead_of_raising(monkeypatch):
    monkeypatch.setattr(ncu.shutil, "which", lambda name: None)
    result = ncu.run_ncu("k.py", ["gemm_kernel"], (128, 128, 128), {}, 0)
    assert result == {"ok": False, "tool": "ncu", "error": "ncu is not on PATH"}


def test_rocprof_command_uses_documented_options():
    cmd = rocprof.rocprof_command("k.py", ["gemm_kernel"], (256, 256, 512), {}, 1, "/tmp/out")
    assert cmd[0] == "rocprofv3" and cmd[cmd.index("--pmc") + 1:cmd.index("--pmc") + 4] == list(rocprof.ROCPROF_COUNTERS)
    assert cmd[cmd.index("--output-format") + 1] == "csv" and cmd[cmd.index("-d") + 1] == "/tmp/out"
    assert cmd[cmd.index("--kernel-include-regex") + 1] == "^(gemm_kernel)"
    assert cmd[cmd.index("--") + 1:cmd.index("--") + 4][1:] == ["-m", "evaluator.profilers.ncu_target"]


def test_rocprof_counter_collection_groups_rows_by_dispatch():
    dispatches = rocprof.parse_counter_collection((FIXTURES / "rocprofv3_counter_collection.csv").read_text())
    assert [d["dispatch_id"] for d in dispatches] == [1, 2, 3]
    assert dispatches[1]["counters"] == {"GRBM_GUI_ACTIVE": 601000.0, "SQ_BUSY_CYCLES": 2390000.0,
                                         "SQ_VALU_MFMA_BUSY_CYCLES": 338000000.0}
    assert dispatches[0]["vgpr"] == 256 and dispatches[0]["agpr"] == 256 and dispatches[0]["lds_bytes"] == 65536


def test_mfma_efficiency_is_busy_cycles_per_simd_cycle():
    counters = {"SQ_VALU_MFMA_BUSY_CYCLES": 512.0, "GRBM_GUI_ACTIVE": 1.0}
    assert rocprof.mfma_efficiency(counters, 256, 4) == 0.5
    assert rocprof.mfma_efficiency({"GRBM_GUI_ACTIVE": 1.0}, 256, 4) is None


def test_rocprof_summary_skips_the_first_dispatch():
    dispatches = rocprof.parse_counter_collection((FIXTURES / "rocprofv3_counter_collection.csv").read_text())
    summary = rocprof.summarize_rocprof(dispatches, GFX950)
    assert summary["dispatches_profiled"] == 2
    expected = sorted([338e6 / (601000 * 1024), 340e6 / (598000 * 1024)])
    assert summary["mfma_efficiency_pct"] == pytest.approx(100 * sum(expected) / 2)
    assert summary["efficiency"] == pytest.approx(sum(expected) / 2)


def test_duplicate_counter_rows_of_one_dispatch_are_summed():
    text = ("Dispatch_Id,Kernel_Name,Counter_Name,Counter_Value\n"
            "5,k,SQ_BUSY_CYCLES,10\n5,k,SQ_BUSY_CYCLES,15\n")
    assert rocprof.parse_counter_collection(text)[0]["counters"] == {"SQ_BUSY_CYCLES": 25.0}


def test_ncu_csv_captured_on_the_h200():
    """Captured by benchmarks/device_session.sh on the H200 (v09 at 4096^3, three launches)."""
    launches = ncu.parse_ncu_csv((FIXTURES / "ncu_h200_v09_captured.csv").read_text())
    assert len(launches) == 3 and {x["kernel"] for x in launches} == {"gemm_kernel"}
    assert all(x["metrics"][ncu.REGISTERS] == 168 for x in launches)
    summary = ncu.summarize_ncu(launches)
    assert summary["matrix_path"] == "wgmma" and summary["gmma_instructions"] == 1048576
    assert 90 < summary["tensor_pipe_active_pct"] < 100
