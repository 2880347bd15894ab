"""Driver and clock readings from the vendor SMI tools, through each family's toolchain (evaluator/targets/<family>/
smi.py), and `evaluator.runtime.device.read_driver_and_clocks` running the tool the target's toolchain names.

Fixtures: tests/fixtures/smi_FIXTURES.md (written from the tools' documented formats; the AMD one never checked
against hardware)."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from evaluator.runtime import device
from evaluator.targets import get_target

FIXTURES = Path(__file__).parent / "fixtures"


def _text(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_nvidia_smi_query_line_gives_driver_and_clocks():
    nvidia = get_target("sm90").toolchain
    reading = nvidia.parse_smi(_text("nvidia_smi_h200.csv"), 0)
    assert reading.driver == "580.159.04"
    assert reading.clocks_mhz == {"sm": 1980.0, "mem": 3201.0, "max_sm": 1980.0, "max_mem": 3201.0}


def test_nvidia_smi_values_the_gpu_does_not_report_are_left_out():
    reading = get_target("sm90").toolchain.parse_smi(_text("nvidia_smi_not_supported.csv"), 0)
    assert reading.driver == "535.183.01" and reading.clocks_mhz == {"sm": 345.0, "max_sm": 1980.0}


@pytest.mark.parametrize("text", ["", "garbage", "580.1, 1980\n", "No devices were found\n"])
def test_unreadable_nvidia_smi_output_gives_nothing(text):
    assert tuple(get_target("sm90").toolchain.parse_smi(text, 0)) == (None, {})


def test_rocm_smi_json_gives_the_driver_and_the_asked_card_s_engine_and_memory_clocks():
    amd = get_target("gfx942").toolchain
    text = _text("rocm_smi_mi300x.json")
    first, second = amd.parse_smi(text, 0), amd.parse_smi(text, 1)
    assert first.driver == second.driver == "6.8.5"
    assert first.clocks_mhz == {"sm": 2100.0, "mem": 1300.0}  # fclk, socclk and the PCIe line left out
    assert second.clocks_mhz == {"sm": 132.0, "mem": 900.0}
    assert tuple(amd.parse_smi(text, 5)) == ("6.8.5", {})  # no such card


@pytest.mark.parametrize("text", ["", "not json", "[1, 2]", '{"card0": "x"}'])
def test_unreadable_rocm_smi_output_gives_nothing(text):
    assert tuple(get_target("gfx950").toolchain.parse_smi(text, 0)) == (None, {})


def test_the_smi_tool_is_asked_about_the_gpu_pytorch_sees(monkeypatch):
    """SMI tools number the host's GPUs; PyTorch's device 0 under CUDA_VISIBLE_DEVICES=1 is the host's GPU 1."""
    nvidia, amd = get_target("sm90").toolchain, get_target("gfx942").toolchain
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    assert nvidia.smi_query(0)[1] == "--id=1" and nvidia.smi_query(1)[1] == "--id=0"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-7c890b39-ac4f-6755-49c5-c92d3ac1779f")
    assert nvidia.smi_query(0)[1] == "--id=GPU-7c890b39-ac4f-6755-49c5-c92d3ac1779f"
    text = _text("rocm_smi_mi300x.json")
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "1")
    assert amd.parse_smi(text, 0).clocks_mhz == {"sm": 132.0, "mem": 900.0}  # card1's clocks


def test_each_family_names_its_own_tool(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert get_target("sm90").toolchain.smi_query(1)[:2] == ["nvidia-smi", "--id=1"]
    assert get_target("sm100").toolchain.smi_query(0)[0] == "nvidia-smi"
    assert get_target("gfx950").toolchain.smi_query(0)[:1] == get_target("gfx942").toolchain.smi_query(0)[:1] \
        == ["rocm-smi"]


def _fake_tool(folder: Path, name: str, fixture: str, exit_code: int = 0) -> Path:
    """An executable called `name` that records its arguments and prints `fixture`."""
    script = folder / name
    script.write_text(f'#!/bin/sh\necho "$@" > "{folder}/{name}.args"\ncat "{FIXTURES / fixture}"\nexit {exit_code}\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_device_runs_the_tool_of_the_target_s_family(tmp_path, monkeypatch):
    _fake_tool(tmp_path, "nvidia-smi", "nvidia_smi_h200.csv")
    _fake_tool(tmp_path, "rocm-smi", "rocm_smi_mi300x.json")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    driver, clocks = device.read_driver_and_clocks("sm90", 0)
    assert driver == "580.159.04" and clocks["max_sm"] == 1980.0
    assert (tmp_path / "nvidia-smi.args").read_text().split()[0] == "--id=0"
    driver, clocks = device.read_driver_and_clocks("gfx950", 1)
    assert driver == "6.8.5" and clocks == {"sm": 132.0, "mem": 900.0}
    assert "--showclocks" in (tmp_path / "rocm-smi.args").read_text().split()


def test_device_reads_nothing_without_a_target_a_tool_or_its_consent(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # neither tool here
    assert tuple(device.read_driver_and_clocks("sm90", 0)) == (None, {})
    _fake_tool(tmp_path, "nvidia-smi", "nvidia_smi_h200.csv", exit_code=9)  # prints, then fails
    assert tuple(device.read_driver_and_clocks("sm90", 0)) == (None, {})
    assert tuple(device.read_driver_and_clocks(None, 0)) == (None, {})  # a GPU nearpeak has no target for
