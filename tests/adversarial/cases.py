"""The adversarial suite's manifest: every case, the defense it exercises, and the verdict it must get.

The kinds of case:
- "file": a candidate file under candidates/, run through `evaluator.isolated.evaluate_isolated`; `expect` is
  the record's status, `rule` a policy rule that must be among the violations, `reasons` the runtime reason
  codes that count as the right reason for a GPU rejection;
- "api": a candidate file through the public `evaluator.api.evaluate(..., run=False)` (what `nearpeak eval FILE`
  calls), to show the plain static path is sandboxed too;
- "foreign": a file without the contract through `evaluator.api.evaluate_foreign` (`--entry`), with
  `kwargs` `entry` and `args`;
- "compare": the candidate through `evaluator.api.compare` against the incumbent named in `kwargs`; `expect`
  is the comparison's `candidate_status` (or its `error`), and it must not be accepted;
- "call": a function of misbehave.py run directly through `evaluator.sandbox.run_isolated`, to test the
  containment itself on behaviour the policy would have refused (`expect` is the sandbox verdict);
- "guarded": like "call", with a copy of the evaluator tree watched by `evaluator.isolated.run_guarded`;
- "static_pair": a candidate and its honest counterpart (`kwargs["baseline"]`) both evaluated statically; the
  cheat must score a lower static objective (`estimated_tflops`) and show wasted work (`useful_fraction` < 1).

`gpu` cases need an sm90 GPU (they pass the static stage on a CPU, by design: the cheat is in what the kernel
computes, which only running it reveals). Placeholders in kwargs: {tmp} is a fresh directory for the case,
{watch} the watched copy of the evaluator tree.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

CANDIDATES = Path(__file__).resolve().parent / "candidates"
MISBEHAVE = "tests.adversarial.misbehave"


@dataclass(frozen=True)
class Case:
    name: str
    defense: str
    kind: str                      # "file" | "api" | "foreign" | "compare" | "call" | "guarded" | "static_pair"
    expect: str                    # record status ("file") or sandbox verdict ("call", "guarded")
    rule: str | None = None        # policy rule that must be reported ("file" cases rejected by the policy)
    reasons: tuple[str, ...] = ()  # runtime statuses that count as the right reason (GPU "file" cases)
    gpu: bool = False
    target: str = "sm90"
    timeout_s: float = 60.0
    memory_mb: int | None = None   # "call" cases: address-space cap of the child
    kwargs: dict = field(default_factory=dict)
    group_killed: bool = False     # "call" cases: the pid the callee wrote to {tmp}/pid must be dead afterwards
    healthy_after: bool = False    # GPU fault/hang cases: the GPU health check afterwards must pass

    @property
    def path(self) -> Path:
        return CANDIDATES / f"{self.name}.py"

    @property
    def func(self) -> str:
        return f"{MISBEHAVE}:{self.name.split('.', 1)[1]}"


def _policy(name: str, rule: str, defense: str) -> Case:
    return Case(name, defense, "file", "policy_violation", rule=rule)


def _provenance(name: str, defense: str) -> Case:
    return Case(name, defense, "file", "foreign_compute", timeout_s=120)


FOREIGN_ARGS = {"entry": "matmul", "args": ["a=256x128:float16", "b=128x256:float16:T"]}


CASES: tuple[Case, ...] = (
    # Policy: rejected before anything runs, with the rule and the line.
    _policy("policy_matmul_in_launch", "vendor_gemm", "no vendor GEMM: torch.matmul inside launch"),
    _policy("policy_matmul_operator", "vendor_gemm", "no vendor GEMM: the @ operator"),
    _policy("policy_linear_scaled_mm", "vendor_gemm", "no vendor GEMM: F.linear / torch._scaled_mm"),
    _policy("policy_getattr_matmul", "vendor_gemm", "no vendor GEMM: fetched by name with getattr"),
    _policy("policy_cublas_binding", "vendor_gemm", "no vendor GEMM: Triton's cuBLASLt binding"),
    _policy("policy_ctypes", "process_network_ffi", "no FFI: cuBLAS through ctypes"),
    _policy("policy_timer_patch", "timer_patch", "timers untouched: CUDA event elapsed_time patched"),
    _policy("policy_time_patch", "timer_patch", "timers untouched: time.perf_counter patched"),
    _policy("policy_seed_rng", "rng_seeding", "fresh random inputs: torch.manual_seed in the candidate"),
    _policy("policy_import_evaluator", "evaluator_access", "no reaching into the evaluator: tolerance loosened"),
    _policy("policy_monkeypatch_torch", "monkeypatch", "no monkeypatching: torch.allclose / torch.equal replaced"),
    _policy("policy_segfault", "process_network_ffi", "no process control: os.kill(SIGSEGV)"),
    _policy("policy_spawn_process", "process_network_ffi", "no process control: subprocess"),
    _policy("policy_fork", "process_network_ffi", "no process control: os.fork"),
    _policy("policy_network", "process_network_ffi", "no network: urllib"),
    _policy("policy_dynamic_import", "dynamic_code", "no hidden imports: __import__ of a computed name"),
    _policy("policy_read_outside", "file_io", "no file access outside scratch: reads /etc/hostname"),
    _policy("policy_tamper_evaluator", "file_io", "evaluator integrity: appends to an evaluator file"),
    # Containment of candidates that pass the policy.
    Case("sandbox_hang_at_import", "wall-clock limit: hangs at import", "file", "timeout", timeout_s=8),
    Case("sandbox_infinite_loop_launch", "wall-clock limit: infinite loop in launch", "file", "timeout",
         timeout_s=8),
    Case("sandbox_endless_output", "bounded output: prints forever", "file", "output_flood", timeout_s=30),
    Case("sandbox_memory_hog", "memory limit: a terabyte at import", "file", "import_error", timeout_s=30),
    # Provenance: only the candidate's own kernels compute, whatever the vendor call is named.
    _provenance("provenance_conv_gemm", "kernel provenance: the product by a convolution (no matmul name)"),
    _provenance("provenance_aliased_einsum", "kernel provenance: einsum through an alias the policy cannot resolve"),
    _provenance("provenance_one_tile_then_library", "kernel provenance: kernel on one tile, a library does the rest"),
    # One sandboxed path for every evaluation: the plain static API and foreign files too.
    Case("static_eval_hang_at_import", "static `nearpeak eval` sandboxed: hangs at import", "api", "timeout",
         target="gfx950", timeout_s=8),
    Case("foreign_forbidden_import", "foreign file (--entry) contained: its host function runs subprocess", "foreign",
         "policy_violation", rule="process_network_ffi", target="gfx950", kwargs=FOREIGN_ARGS),
    Case("foreign_hang", "foreign file (--entry) sandboxed: its host function never returns", "foreign", "timeout",
         target="gfx950", timeout_s=8, kwargs=FOREIGN_ARGS),
    # Containment tested directly, on behaviour the policy would have refused.
    Case("call.spin_forever", "wall-clock limit, process group killed", "call", "timeout", timeout_s=2),
    Case("call.segfault", "segfault contained", "call", "crashed", timeout_s=20),
    Case("call.exit_abruptly", "os._exit with a non-zero code", "call", "crashed", timeout_s=20),
    Case("call.exit_zero_without_result", "os._exit(0) before any result", "call", "crashed", timeout_s=20),
    Case("call.forge_result", "a result forged without the sandbox's token", "call", "crashed", timeout_s=20),
    Case("call.endless_output", "bounded output: endless stdout", "call", "output_flood", timeout_s=30),
    Case("call.fork_and_linger", "a forked child dies with the group", "call", "ok", timeout_s=20,
         kwargs={"pid_file": "{tmp}/pid"}, group_killed=True),
    Case("call.spawn_and_linger", "a spawned program dies with the group", "call", "ok", timeout_s=20,
         kwargs={"pid_file": "{tmp}/pid"}, group_killed=True),
    Case("call.allocate", "address-space limit", "call", "error", timeout_s=20, memory_mb=1024,
         kwargs={"megabytes": 4096}),
    Case("call.raise_error", "an exception carries its type and message", "call", "error", timeout_s=20),
    Case("call.fake_cuda_fault", "CUDA fault text becomes runtime_fault", "call", "runtime_fault", timeout_s=20),
    Case("call.hip_fault_abort", "HIP page fault + abort becomes runtime_fault", "call", "runtime_fault",
         timeout_s=20),
    Case("guarded.tamper", "evaluator files hashed before and after", "guarded", "tampered", timeout_s=20,
         kwargs={"path": "{watch}/runtime/correctness.py"}),
    # The static objective: wasted matrix work must lower the score, never raise it.
    Case("static_redundant_mfma", "static objective: every MFMA done twice (copy never stored) scores lower",
         "static_pair", "lower_score", target="gfx950", timeout_s=300, kwargs={"baseline": "honest_gfx950"}),
    # Honest kernels: must pass everywhere they can run.
    Case("honest_sm90", "honest sm90 kernel passes", "file", "ok", timeout_s=300),
    Case("honest_gfx950", "honest gfx950 kernel passes (static on CPU; runtime only on an MI350/MI355)", "file",
         "ok", target="gfx950", timeout_s=300),
    # GPU: the cheat is in what the kernel computes; only running it reveals it.
    # Its replay is a torch copy, which the provenance trace refuses before the fresh-inputs check gets to it.
    Case("gpu_cached_result", "different inputs give different outputs", "file", "rejected", gpu=True,
         reasons=("cached_result", "wrong_result", "foreign_compute"), timeout_s=300),
    Case("gpu_partial_write", "output poisoned and checked fully written", "file", "rejected", gpu=True,
         reasons=("unwritten",), timeout_s=300),
    Case("gpu_cheap_approx", "per-dtype relative-error bound", "file", "rejected", gpu=True,
         reasons=("wrong_result",), timeout_s=300),
    # Launching off the evaluator's stream also races the evaluator's own fills, which can surface first.
    Case("gpu_side_stream", "timing on the evaluator's stream, all streams synchronized", "file", "rejected",
         gpu=True, reasons=("untimed_work", "impossible_speed", "unwritten", "wrong_result"), timeout_s=300),
    Case("gpu_mutate_inputs", "inputs checked unmodified", "file", "rejected", gpu=True,
         reasons=("inputs_modified",), timeout_s=300),
    Case("gpu_declared_shapes_only", "held-out and small shapes", "file", "rejected", gpu=True,
         reasons=("unwritten", "wrong_result"), timeout_s=300),
    Case("gpu_illegal_address", "GPU fault contained, GPU checked healthy after", "file", "runtime_fault", gpu=True,
         healthy_after=True, timeout_s=300),
    Case("gpu_hang_kernel", "hung GPU kernel killed, GPU checked healthy after", "file", "timeout", gpu=True,
         healthy_after=True, timeout_s=40),
    Case("gpu_foreign_on_device", "kernel provenance on the GPU: vendor compute only off the meta device", "file",
         "foreign_compute", gpu=True, timeout_s=300),
    Case("compare_only_cheat", "compare traces the candidate: vendor compute only while compared", "compare",
         "foreign_compute", gpu=True, timeout_s=300, kwargs={"incumbent": "honest_sm90"}),
)


def cpu_cases() -> tuple[Case, ...]:
    return tuple(c for c in CASES if not c.gpu)


def gpu_cases() -> tuple[Case, ...]:
    return tuple(c for c in CASES if c.gpu)
