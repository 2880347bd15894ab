"""Is the candidate's output the GEMM of its inputs? Checked on fresh random data, on several shapes.

Every check draws new random operands from a recorded seed (never zeros: zeros hide unwritten outputs and
wrong indexing), poisons the output with NaN before the call so unwritten elements stay visible, and
compares the operands with a copy taken before the call. The reference is the exact operands upcast to
float64 and multiplied through torch (on the GPU for speed; H200 and MI355X run fp64 matrix products at
tens of TFLOP/s), so the only error measured is the candidate's.

The score is the relative error ||out - ref||_F / ||ref||_F, judged against a tolerance that adds two
documented terms (see `tolerance_for`): what rounding the result to OUT_DTYPE costs, and what the matrix
unit's accumulation for the operand format costs. NaN or Inf in the output never passes, whatever the norm.

This module runs on CPU tensors as well as GPU ones: the tests drive it with a CPU `launch`.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

import torch

from ..compile import operand_shapes, torch_dtype
from ..lowp import dequantize_operand, quantize_mxfp4, to_fp8

# Relative Frobenius error of an honest result rounded to OUT_DTYPE. Rounding to nearest leaves a uniform
# error of at most half an ulp per element; over random data the norm-wise ratio is about ulp/sqrt(12)
# times E[1/mantissa] (bf16: 2^-7/3.46*0.72 ~ 1.6e-3). Each bound is 2-10x what random data gives
# (the figures below: torch's own rounding of a float64 product, K = 256..2048).
OUTPUT_ROUNDING_TOLERANCE: dict[str, float] = {
    "float32": 5e-5,        # no output rounding to speak of; covers fp32 accumulation order at K ~ 16k
    "float16": 2e-3,        # 10 stored mantissa bits: ~2.1e-4 on random data
    "bfloat16": 8e-3,       # 7 stored mantissa bits: ~1.7e-3 on random data
    "float8_e4m3fn": 6e-2,  # 3 stored mantissa bits: ~2.7e-2 on random data
    "float8_e5m2": 1.2e-1,  # 2 stored mantissa bits: ~5.3e-2 on random data
}

# Relative error the matrix unit's accumulation adds for each operand format. The operands themselves are
# exact in the reference, so this is only about how the hardware sums products.
ACCUMULATION_TOLERANCE: dict[str, float] = {
    "float32": 2e-3,        # a float32 dot may run in TF32 (Triton's default): ~3e-4 expected
    "float16": 1e-4,        # fp32 accumulators
    "bfloat16": 1e-4,       # fp32 accumulators
    "float8_e4m3fn": 1e-2,  # Hopper's fp8 wgmma keeps fewer accumulator bits than fp32 (DeepSeek-V3 report)
    "float8_e5m2": 1e-2,    # same accumulator as e4m3
    "float4_e2m1": 1e-3,    # gfx950 scaled MFMA accumulates in fp32; e8m0 scales are exact powers of two
}

POISON = float("nan")


def tolerance_for(dtype: str, out_dtype: str) -> float:
    """The relative-error bound for a kernel with operand format `dtype` writing `out_dtype`."""
    if dtype not in ACCUMULATION_TOLERANCE:
        raise ValueError(f"no accumulation tolerance for operand dtype {dtype!r}")
    if out_dtype not in OUTPUT_ROUNDING_TOLERANCE:
        raise ValueError(f"no rounding tolerance for output dtype {out_dtype!r}")
    return ACCUMULATION_TOLERANCE[dtype] + OUTPUT_ROUNDING_TOLERANCE[out_dtype]


# ---------------------------------------------------------------------------------------------
# Shapes


def _round_up(value: int, multiple: int) -> int:
    return max(multiple, -(-value // multiple) * multiple)


def small_shape(multiple: tuple[int, int, int]) -> tuple[int, int, int]:
    """A quick shape any kernel with this SHAPE_MULTIPLE accepts: about 256 x 256 x 512."""
    return (_round_up(256, multiple[0]), _round_up(256, multiple[1]), _round_up(512, multiple[2]))


def held_out_shape(multiple: tuple[int, int, int], seed: int) -> tuple[int, int, int]:
    """A shape drawn from the seed that no SHAPES list names and the proposer never saw.

    Dimensions whose multiple is under 128 land off the usual 128-tiles, so a kernel that claims to mask
    its edges has to; dimensions with a coarse multiple are just a different whole number of tiles.
    """
    import random

    rng = random.Random(seed ^ 0x5EED)
    dims = []
    for lo, hi, mult in zip((300, 300, 400), (900, 900, 1400), multiple):
        if mult >= 128:
            dims.append(mult * rng.randint(2, 5))
            continue
        value = _round_up(rng.randint(lo, hi), mult)
        while value % 128 == 0:
            value += mult
        dims.append(value)
    return tuple(dims)  # type: ignore[return-value]


def correctness_shapes(spec, seed: int, benchmark_shape=None) -> list[tuple[int, int, int]]:
    """The benchmark shape, a small one, and a held-out (possibly non-tile-multiple) one; no duplicates."""
    shapes = [tuple(benchmark_shape or spec.benchmark_shape), small_shape(spec.shape_multiple),
              held_out_shape(spec.shape_multiple, seed)]
    out: list[tuple[int, int, int]] = []
    for shape in shapes:
        if shape not in out and spec.supports(shape):
            out.append(shape)
    return out


# ---------------------------------------------------------------------------------------------
# Inputs


def shape_seed(seed: int, shape, salt: int = 0) -> int:
    """A per-shape, per-use seed derived from the evaluation's recorded seed."""
    m, n, k = shape
    return (seed * 1_000_003 + m * 7919 + n * 104_729 + k * 1_299_709 + salt * 15_485_863) % (2 ** 63)


def _normal(shape, generator: torch.Generator, device) -> torch.Tensor:
    return torch.randn(shape, generator=generator, device=device, dtype=torch.float32)


def fill_operands(args: dict[str, torch.Tensor], spec, generator: torch.Generator) -> None:
    """Overwrite the operands (not the output) in place with fresh random values: no zeros, no NaN.

    Normal values keep products well inside every format's range; fp8 operands are rounded with
    saturation, MXFP4 operands are block-quantized (a realistic scale per 32 along K), and per-tensor
    scales are drawn from [0.5, 2) so a kernel that ignores them fails.
    """
    device = args["a"].device
    for name in ("a", "b"):
        target = args[name]
        if spec.scales == "e8m0_k32":
            rows, half_k = target.shape
            packed, scales = quantize_mxfp4(_normal((rows, half_k * 2), generator, device))
            target.copy_(packed)
            args[f"{name}_scale"].copy_(scales)
            continue
        values = _normal(tuple(target.shape), generator, device)
        target.copy_(to_fp8(values, spec.dtype) if spec.dtype.startswith("float8") else values.to(target.dtype))
        if spec.scales == "per_tensor":
            scale = 0.5 + 1.5 * torch.rand((1,), generator=generator, device=device)
            args[f"{name}_scale"].copy_(scale)


def make_arguments(spec, shape, device, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """Allocate every launch argument of the contract (operand_shapes) and fill the operands."""
    args = {name: torch.empty(dims, dtype=torch_dtype(dt), device=device)
            for name, (dims, dt) in operand_shapes(spec, shape).items()}
    fill_operands(args, spec, generator)
    poison(args["c"])
    return args


def generator_for(device, seed: int) -> torch.Generator:
    gen = torch.Generator(device=torch.device(device))
    gen.manual_seed(seed)
    return gen


# ---------------------------------------------------------------------------------------------
# Poison, snapshots, reference


def poison(c: torch.Tensor) -> None:
    """Fill the output with NaN (every float format nearpeak writes has one)."""
    c.fill_(POISON)


def _bytes(t: torch.Tensor) -> torch.Tensor:
    return t.detach().contiguous().view(torch.uint8)


def snapshot_inputs(args: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Bitwise copies of every argument except the output."""
    return {name: _bytes(t).clone() for name, t in args.items() if name != "c"}


def modified_inputs(args: dict[str, torch.Tensor], snapshot: dict[str, torch.Tensor]) -> list[str]:
    """Names of the arguments whose bytes changed since `snapshot` (NaN-safe: compares bits)."""
    return [name for name, before in snapshot.items() if not torch.equal(_bytes(args[name]), before)]


def reference(args: dict[str, torch.Tensor], spec) -> torch.Tensor:
    """C = A @ B^T in float64 from the exact dequantized operands."""
    a = dequantize_operand(args["a"], spec.dtype, spec.scales, args.get("a_scale")).double()
    b = dequantize_operand(args["b"], spec.dtype, spec.scales, args.get("b_scale")).double()
    return a @ b.T


# ---------------------------------------------------------------------------------------------
# Judging one output


@dataclass(frozen=True)
class ShapeCheck:
    """The verdict on one shape. `reason` is None when it passed."""

    shape: tuple[int, int, int]
    ok: bool
    reason: str | None             # unwritten | non_finite | inputs_modified | wrong_result | launch_error
    rel_error: float | None
    tolerance: float
    max_abs_error: float | None
    worst_index: tuple[int, int] | None   # (row, col) of the largest error, or of the first bad element
    bad_elements: int = 0
    detail: str = ""
    held_out: bool = False         # the seed's held-out shape: its sentence never names its dimensions

    def to_dict(self) -> dict:
        d = asdict(self)
        d["shape"] = list(self.shape)
        d["worst_index"] = list(self.worst_index) if self.worst_index else None
        return d

    @property
    def label(self) -> str:
        """How sentences name the shape: its dimensions, or "held-out shape" (verdicts reach the proposer)."""
        return "held-out shape" if self.held_out else "x".join(str(d) for d in self.shape)

    def describe(self) -> str:
        where = f" at (row {self.worst_index[0]}, col {self.worst_index[1]})" if self.worst_index else ""
        shape = self.label
        if self.ok:
            return f"{shape}: relative error {self.rel_error:.2e} <= {self.tolerance:.1e}"
        if self.reason == "wrong_result" and self.detail:
            return f"{shape}: relative error {self.rel_error:.2e} within tolerance, but {self.detail}{where}"
        if self.reason == "wrong_result":
            return (f"{shape}: relative error {self.rel_error:.2e} > tolerance {self.tolerance:.1e}; largest "
                    f"error {self.max_abs_error:.3g}{where}")
        return f"{shape}: {self.reason}: {self.detail}{where}"


def _index(flat: int, cols: int) -> tuple[int, int]:
    return (flat // cols, flat % cols)


def _count_and_first(mask: torch.Tensor, cols: int) -> tuple[int, tuple[int, int]]:
    """How many elements a boolean mask marks, and the (row, col) of the first."""
    return int(mask.sum()), _index(int(mask.flatten().nonzero()[0]), cols)


def judge(out: torch.Tensor, ref: torch.Tensor, tol: float, shape, modified: list[str] | None = None) -> ShapeCheck:
    """Compare one output with its float64 reference; poison left behind means elements were not written."""
    shape = tuple(shape)
    if modified:
        return ShapeCheck(shape, False, "inputs_modified", None, tol, None, None,
                          detail=f"launch changed its input(s) {', '.join(modified)}")
    out64 = out.detach().to(torch.float64)
    cols = out64.shape[1]
    nan = torch.isnan(out64)
    if bool(nan.any()):
        count, first = _count_and_first(nan, cols)
        return ShapeCheck(shape, False, "unwritten", None, tol, None, first, count,
                          detail=f"{count} of {out64.numel()} output elements still hold the NaN poison "
                                 "(never written, or written as NaN)")
    inf = ~torch.isfinite(out64)
    if bool(inf.any()):
        count, first = _count_and_first(inf, cols)
        return ShapeCheck(shape, False, "non_finite", None, tol, None, first, count,
                          detail=f"{count} output elements are infinite")
    diff = (out64 - ref).abs()
    ref_norm = float(torch.linalg.vector_norm(ref))
    diff_norm = float(torch.linalg.vector_norm(diff))
    rel = diff_norm / ref_norm if ref_norm > 0 else diff_norm
    flat = int(diff.flatten().argmax())
    worst = _index(flat, cols)
    max_abs = float(diff.flatten()[flat])
    max_ref = float(ref.abs().max()) if ref.numel() else 0.0
    if not (math.isfinite(rel) and rel <= tol):
        return ShapeCheck(shape, False, "wrong_result", rel, tol, max_abs, worst)
    # The norm hides a few bad elements (one wrong edge element in 10^7); no single error may exceed the
    # tolerance relative to the largest output, which rounding alone never reaches (bf16: 2^-8 < 8e-3).
    if max_abs > tol * max_ref:
        return ShapeCheck(shape, False, "wrong_result", rel, tol, max_abs, worst,
                          detail=f"one element is off by {max_abs:.3g}, over {tol:.1e} x max|ref| = {tol * max_ref:.3g}")
    return ShapeCheck(shape, True, None, rel, tol, max_abs, worst)


def judge_output(args: dict[str, torch.Tensor], spec, shape, modified: list[str] | None = None) -> ShapeCheck:
    """`judge` the output in `args` against the reference of the operands in `args`, at the kernel's tolerance."""
    return judge(args["c"], reference(args, spec), tolerance_for(spec.dtype, spec.out_dtype), shape, modified)


# ---------------------------------------------------------------------------------------------
# Running checks

Launch = Callable[..., object]


@dataclass(frozen=True)
class CorrectnessReport:
    ok: bool
    verdict: str
    checks: tuple[ShapeCheck, ...]
    seed: int
    reference_dtype: str = "float64"

    @property
    def first_failure(self) -> ShapeCheck | None:
        return next((c for c in self.checks if not c.ok), None)

    def to_dict(self) -> dict:
        return {"ok": self.ok, "verdict": self.verdict, "seed": self.seed, "reference_dtype": self.reference_dtype,
                "shapes": [c.to_dict() for c in self.checks]}


def run_and_judge(launch: Launch, args: dict[str, torch.Tensor], spec, knobs: dict, shape,
                  sync: Callable[[], None] = lambda: None) -> ShapeCheck:
    """Poison, snapshot, launch once, synchronize, then judge output and operands."""
    poison(args["c"])
    before = snapshot_inputs(args)
    launch(**args, **knobs)
    sync()
    return judge_output(args, spec, shape, modified_inputs(args, before))


def check_shape(launch: Launch, spec, shape, knobs: dict, device, seed: int,
                sync: Callable[[], None] = lambda: None) -> ShapeCheck:
    """Fresh inputs for `shape` from `seed`, one launch, one verdict. Launch exceptions propagate."""
    args = make_arguments(spec, shape, device, generator_for(device, shape_seed(seed, shape)))
    return run_and_judge(launch, args, spec, knobs, shape, sync)


def check_correctness(launch: Launch, spec, shapes, knobs: dict, device, seed: int,
                      sync: Callable[[], None] = lambda: None, held_out=None) -> CorrectnessReport:
    """Check every shape; the verdict names the first one that fails and where its error is largest.

    The shape equal to `held_out` is marked in its check and called "held-out shape" in the verdict.
    """
    checks = tuple(replace(c, held_out=held_out is not None and c.shape == tuple(held_out))
                   for c in (check_shape(launch, spec, shape, knobs, device, seed, sync) for shape in shapes))
    failed = next((c for c in checks if not c.ok), None)
    verdict = "correct on " + ", ".join(c.label for c in checks) if failed is None else failed.describe()
    return CorrectnessReport(ok=failed is None, verdict=verdict, checks=checks, seed=seed)
