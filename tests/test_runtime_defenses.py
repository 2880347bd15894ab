"""Runtime defenses and device detection, on CPU: caches, stale outputs, untimed work, speed of light."""
from __future__ import annotations

import time

import pytest
import torch

from evaluator.contract import KernelSpec
from evaluator.runtime import correctness as corr
from evaluator.runtime import defenses, device

SPEC = KernelSpec(path="cpu-test", target="sm90", dtype="bfloat16", out_dtype="bfloat16", shapes=((128, 96, 64),),
                  shape_multiple=(1, 1, 1))
SHAPE = (128, 96, 64)


def honest(a, b, c):
    c.copy_((a.float() @ b.float().T).to(c.dtype))


def args(seed=1):
    return corr.make_arguments(SPEC, SHAPE, "cpu", corr.generator_for("cpu", seed))


class FirstCallOnly:
    """Computes on its first call, then returns whatever it computed then."""

    def __init__(self):
        self.cache = None

    def __call__(self, a, b, c):
        if self.cache is None:
            self.cache = (a.float() @ b.float().T).to(c.dtype)
        c.copy_(self.cache)


def test_cached_result_is_caught_when_operands_change_in_place():
    launch, x = FirstCallOnly(), args()
    launch(**x)
    result = defenses.cached_result_check(launch, x, SPEC, {}, SHAPE, corr.generator_for("cpu", 9), lambda: None)
    assert not result["ok"] and result["reason"] == "cached_result"


def test_honest_kernel_passes_the_fresh_input_check():
    x = args()
    honest(**x)
    result = defenses.cached_result_check(honest, x, SPEC, {}, SHAPE, corr.generator_for("cpu", 9), lambda: None)
    assert result["ok"], result["detail"]


def test_timed_outputs_are_rechecked_per_input_set():
    sets = [args(seed) for seed in (1, 2, 3)]
    snaps = [corr.snapshot_inputs(s) for s in sets]
    launch = FirstCallOnly()
    for s in sets:
        launch(**s)
    result = defenses.recheck_timed_outputs(sets, snaps, SPEC, SHAPE)
    assert not result["ok"] and "input set 1" in result["detail"]
    for s in sets:
        honest(**s)
    assert defenses.recheck_timed_outputs(sets, snaps, SPEC, SHAPE)["ok"]


def test_timed_outputs_fail_when_an_operand_was_changed_during_timing():
    sets = [args(1)]
    snaps = [corr.snapshot_inputs(sets[0])]
    honest(**sets[0])
    sets[0]["b"][0, 0] += 1
    result = defenses.recheck_timed_outputs(sets, snaps, SPEC, SHAPE)
    assert not result["ok"] and result["reason"] == "inputs_modified"


def test_untimed_work_verdict():
    assert defenses.untimed_work_verdict(event_ms=10.0, host_launch_ms=1.5, wall_ms=10.6)[0]     # GPU-bound
    assert defenses.untimed_work_verdict(event_ms=0.5, host_launch_ms=8.0, wall_ms=8.4)[0]      # launch-bound
    ok, excess = defenses.untimed_work_verdict(event_ms=0.3, host_launch_ms=1.5, wall_ms=7.5)   # side stream
    assert not ok and excess == pytest.approx(5.0)
    assert not defenses.untimed_work_verdict(event_ms=3.75, host_launch_ms=1.5, wall_ms=7.5)[0]  # half hidden


def test_untimed_work_check_passes_honest_cpu_work():
    a = torch.randn(128, 128)
    result = defenses.untimed_work_check(defenses.Timer("cpu"), lambda i: a @ a, calls=10)
    assert result["ok"], result["detail"]


def test_speed_of_light_scales_with_the_reported_clock():
    ok = defenses.speed_of_light(900.0, 989.4, 1.83, max_clock_mhz=1980)
    assert ok["ok"] and ok["limit_tflops"] == pytest.approx(989.4 * 1980 / 1830 * 1.02)
    too_fast = defenses.speed_of_light(1200.0, 989.4, 1.83, max_clock_mhz=1980)
    assert not too_fast["ok"] and too_fast["reason"] == "impossible_speed"
    assert defenses.speed_of_light(1050.0, 989.4, 1.83, max_clock_mhz=None)["ok"]      # 10% margin unknown clock
    assert defenses.speed_of_light(5.0, None, 1.83, None)["limit_tflops"] is None


def test_integrity_sees_a_patched_timer(monkeypatch):
    snapshot = defenses.Integrity.capture()
    assert snapshot.check()["ok"]
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    result = snapshot.check()
    assert not result["ok"] and "time.perf_counter" in result["detail"] and result["reason"] == "tampered"


def test_file_hashes_change_with_content(tmp_path):
    from evaluator import integrity

    (tmp_path / "x.py").write_text("A = 1\n")
    before = integrity.snapshot(tmp_path)
    (tmp_path / "x.py").write_text("A = 2\n")
    assert before.changes(integrity.snapshot(tmp_path)) == ("x.py",)


# ---------------------------------------------------------------------------------------------
# Device detection


def test_capabilities_and_arch_names_map_to_targets():
    assert device.target_for_capability((9, 0)) == "sm90"
    assert device.target_for_capability((8, 0)) is None
    assert device.target_for_gcn_arch("gfx950:sramecc+:xnack-") == "gfx950"
    assert device.target_for_gcn_arch("gfx942:sramecc+:xnack-") == "gfx942"
    assert device.target_for_gcn_arch("gfx90a:sramecc+:xnack-") is None


def test_health_check_on_cpu_is_healthy():
    assert device.health_check("cpu") == {"healthy": True, "message": None}


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without a GPU")
def test_require_device_without_gpu_raises_no_device():
    from evaluator.errors import NoDeviceError

    with pytest.raises(NoDeviceError):
        device.require_device("sm90")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without a GPU")
def test_detect_target_without_gpu_is_none():
    assert device.detect_target() is None


def test_stream_order_check_does_not_apply_on_cpu():
    x = args()
    result = defenses.stream_order_check(honest, x, SPEC, {}, SHAPE, corr.generator_for("cpu", 3), "cpu")
    assert result["ok"] and "not applicable" in result["detail"]
