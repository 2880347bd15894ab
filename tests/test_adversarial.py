"""The adversarial suite: every cheating or broken candidate gets its own verdict, every honest one passes.

The CPU cases (policy, containment, tampering, static compile of the honest kernels) run in CI as one loop,
the way an optimization run meets them: the loop must survive the whole suite and each case must get the
verdict the manifest (tests/adversarial/cases.py) expects. The GPU cases are marked `gpu`.
"""
from __future__ import annotations

import pytest

from evaluator.sandbox import default_worker
from tests.adversarial.cases import CASES, cpu_cases, gpu_cases
from tests.adversarial.runner import detect_target, run_case

pytestmark = pytest.mark.slow  # every CPU case runs in its own sandboxed interpreter, several until their timeout

CPU_NAMES = [c.name for c in cpu_cases()]


@pytest.fixture(scope="module")
def cpu_suite():
    """One pass over every CPU case, in manifest order, in this one process."""
    default_worker().start()  # the warm worker's own start-up is not any case's time
    return {case.name: run_case(case) for case in cpu_cases()}


def test_manifest_has_a_case_per_defense():
    assert len({c.name for c in CASES}) == len(CASES)
    cheats = [c for c in CASES if c.expect != "ok"]
    assert len(cheats) >= 12
    assert {"vendor_gemm", "process_network_ffi", "timer_patch", "rng_seeding", "evaluator_access", "file_io",
            "monkeypatch", "dynamic_code"} <= {c.rule for c in CASES if c.rule}
    assert {"timeout", "crashed", "runtime_fault", "output_flood", "tampered", "foreign_compute"} <= {
        c.expect for c in CASES}
    assert {"file", "api", "foreign", "compare", "call", "guarded", "static_pair"} == {c.kind for c in CASES}
    for case in CASES:
        if case.kind in ("file", "api", "foreign", "compare", "static_pair"):
            assert case.path.is_file(), case.path


def test_loop_survives_the_whole_cpu_suite(cpu_suite):
    assert list(cpu_suite) == CPU_NAMES  # the caller got through every case and is still here
    verdicts = {name: outcome.got for name, outcome in cpu_suite.items()}
    assert all(verdicts.values())
    assert len(set(verdicts.values())) >= 8  # distinct failures get distinct verdicts, not one catch-all


@pytest.mark.parametrize("name", CPU_NAMES)
def test_cpu_case_gets_its_verdict(cpu_suite, name):
    outcome = cpu_suite[name]
    assert outcome.passed, f"{name}: expected {outcome.expected}, got {outcome.got} ({outcome.detail})"


def test_policy_violation_names_rule_and_line(cpu_suite):
    outcome = cpu_suite["policy_matmul_in_launch"]
    assert "[vendor_gemm] at line 12" in outcome.detail
    assert "torch.matmul(a, b.t(), out=c)" in outcome.detail


def test_foreign_compute_names_the_operator_and_the_line(cpu_suite):
    outcome = cpu_suite["provenance_one_tile_then_library"]
    assert "torch operator aten.convolution at line 55" in outcome.detail


def test_timeouts_end_near_their_limit(cpu_suite):
    for name in ("sandbox_hang_at_import", "sandbox_infinite_loop_launch", "call.spin_forever",
                 "static_eval_hang_at_import", "foreign_hang"):
        case = next(c for c in CASES if c.name == name)
        assert cpu_suite[name].wall_s < case.timeout_s + 5, name


@pytest.fixture(scope="module")
def present_target():
    return detect_target()


@pytest.mark.gpu
@pytest.mark.parametrize("name", [c.name for c in gpu_cases()])
def test_gpu_case_gets_its_verdict(present_target, name):
    case = next(c for c in gpu_cases() if c.name == name)
    if present_target != case.target:
        pytest.skip(f"needs a {case.target} GPU")
    outcome = run_case(case, present_target)
    assert outcome.passed, f"{name}: expected {outcome.expected}, got {outcome.got} ({outcome.detail})"


@pytest.mark.gpu
def test_honest_kernel_passes_the_runtime_stage(present_target):
    case = next(c for c in CASES if c.name == f"honest_{present_target}")
    outcome = run_case(case, present_target)
    assert outcome.passed and outcome.runtime_ran, outcome.detail
