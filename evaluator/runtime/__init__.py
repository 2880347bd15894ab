"""Runtime evaluation on a real GPU: correctness, timing against the vendor library, defenses, profilers.

Entry points: `runtime_evaluate` (one candidate; returns the record's "runtime" section) and `compare`
(candidate against incumbent, interleaved, with a confidence interval). Both need a GPU of the kernel's
target and raise `evaluator.errors.NoDeviceError` without one. The modules below them (correctness,
timing, defenses) also run on CPU tensors, which is how CI tests them. The same path serves CUDA and ROCm
PyTorch; the ROCm side has not yet run on hardware (`Target.verified_on_hardware`).

The "runtime" section (every figure measured on the named device unless `provenance` says otherwise):

- `status`: "ok" or a reason code: unwritten, non_finite, inputs_modified, wrong_result (correctness);
  cached_result, untimed_work, impossible_speed, tampered (defenses); compile_error, launch_error,
  runtime_fault (the launch raised). `correct` is `status == "ok"`.
- `verdict`: "correct", or the sentence naming the first failing shape and the (row, col) of its largest
  error; `summary`: the shapes checked and headline figures of a passing kernel.
- `shapes`: per shape, `rel_error` (||out - ref|| / ||ref|| against a float64 reference), `tolerance`,
  `max_abs_error`, `worst_index`, `reason`; the shapes are the benchmark shape, a small one and a held-out
  one drawn from `seed`.
- `tflops`, `median_ms`, `pct_of_peak` (of the datasheet `peak_tflops`), `vendor`, `vendor_tflops`,
  `ratio_vs_vendor` (vendor time / candidate time: above 1 the candidate is faster), `spread` (median,
  quartiles, min/max per side), `timing_method`, `input_sets`, `rotation_bytes`, `launch_bound`.
- `defenses`: one entry per check (timed_outputs, timed_stream, stream_order, fresh_inputs,
  speed_of_light, integrity) with `ok` and `detail`.
- `device`, `device_info`, `driver`, `clocks_mhz` (before, after_timing), `torch_version`,
  `triton_version`, `cuda_version` / `hip_version`, `seed`, `phase_seconds`, `health`.
- With `profile=True`: `profile` (the target's profiler: Nsight Compute on NVIDIA, rocprofv3 on AMD) and
  its headline `efficiency`, the matrix-unit busy share (0..1).
"""
from __future__ import annotations

from .evaluate import compare, runtime_evaluate

__all__ = ["compare", "runtime_evaluate"]
