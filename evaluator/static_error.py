"""How far the static model can be trusted for the ratio of two kernels' estimates, and the interval it implies.

A static step compares two estimates. Each target's validation sets (benchmarks/static_model_fidelity.py)
measure how far the estimated ratio of two kernels strays from the reference ratio: over every pair (i, j) of a
set, the error is log(est_i / est_j) - log(ref_i / ref_j). The target's `log_sigma` is a normal scale estimate
robust to the few kernels the model gets far wrong, 1.4826 x the median |error| (those few set the widening
below instead), and the interval of a candidate/incumbent ratio r is r x exp(+-(z sigma)), z = 1.645 (a
one-sided 95% bound under a normal error). A static step is accepted only when the interval's lower bound clears 1 + min_gain.

Some mechanisms of the model have never been checked against a measurement on a target (on gfx950: anything
that changes the number of resident waves, since every published stage runs one wave per SIMD). A gain that
involves one (`mechanisms_changed`) is labelled with it, and its interval is widened by the 90th percentile of
the |ratio errors| the target's sets have shown (`unvalidated_log_penalty`): the model's word on such a change
counts for little.

`static_speedup` works on two static sections (the `static` part of two records, one shape): the loop combines
several shapes itself.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

Z_ONE_SIDED_95 = 1.645

# What a static gain may rest on, as the two static sections show it. Each entry: (mechanism, what it is).
MECHANISMS = {
    "resident_streams": "a change in the streams sharing a matrix pipe (waves per SIMD, warpgroups, CTAs per "
                        "CU/SM: occupancy)",
    "warp_specialization": "a change to or from a warp-specialized producer/consumer split",
    "persistent": "a change to or from a persistent tile loop",
    "operand_feed": "the operand-feed bound into the CU/SM",
    "lds_bandwidth": "the CU's shared LDS bandwidth bound",
    "memory_bound_regime": "a shape below the target's machine balance (FLOPs per byte moved at least), where the "
                           "estimate is judged by a regime-specific error, or none",
    "spills": "a change in register spills: the cache level serving local memory (evaluator.local_memory), or the "
              "bound its traffic sets",
}
_BOUND_MECHANISM = {"operand_feed": "operand_feed", "lds": "lds_bandwidth", "barriers": "resident_streams",
                    "spills": "spills"}

# For a target without any validation set: the widest figures of the targets that have one (tests check that
# these stay at least as wide as every target's own).
WIDEST_LOG_SIGMA = 0.25
WIDEST_LOG_PENALTY = 1.5


@dataclass(frozen=True)
class StaticErrorModel:
    """A target's error for the ratio of two static estimates, and where it comes from."""

    log_sigma: float                    # robust scale of log(estimated ratio / reference ratio) over validation pairs
    source: str                         # the validation set(s), their n, the figures' provenance
    pairs: int
    validated_mechanisms: tuple[str, ...]
    unvalidated_log_penalty: float      # 90th percentile |log ratio error| seen: the widening for an unvalidated gain
    z: float = Z_ONE_SIDED_95
    # The same scale over pairs measured at memory-bound shapes (`regime`); None: that regime is not validated.
    memory_bound_log_sigma: float | None = None
    memory_bound_source: str = ""

    def to_dict(self) -> dict:
        return {**asdict(self), "validated_mechanisms": list(self.validated_mechanisms)}

    @classmethod
    def from_dict(cls, data: dict) -> StaticErrorModel:
        return cls(float(data["log_sigma"]), str(data["source"]), int(data["pairs"]),
                   tuple(data.get("validated_mechanisms") or ()), float(data["unvalidated_log_penalty"]),
                   float(data.get("z", Z_ONE_SIDED_95)), data.get("memory_bound_log_sigma"),
                   str(data.get("memory_bound_source") or ""))


def element_bytes(dtype: str) -> float | None:
    """Bytes per operand element of a contract dtype name ("bfloat16", "float8_e4m3fn", "float4_e2m1", ...)."""
    for prefix, size in (("float4", 0.5), ("float8", 1.0), ("float16", 2.0), ("bfloat16", 2.0), ("float32", 4.0)):
        if dtype.startswith(prefix):
            return size
    return None


def gemm_min_bytes(shape, operand_bytes: float) -> float:
    """Bytes a GEMM must move at least: A and B read once, C written once in 2 bytes."""
    m, n, k = shape
    return (m + n) * k * operand_bytes + 2 * m * n


def regime(shape, dtype: str | None, peak_tflops: float | None, peak_memory_tbps: float | None) -> dict | None:
    """Whether a GEMM shape is memory- or compute-bound on a target: its arithmetic intensity (useful FLOPs per
    byte it must move: A and B read once, C written once in 2 bytes) against the machine balance (the dtype's
    peak FLOP/s over peak bytes/s). None where the dtype or a peak to compare with is not known."""
    size = element_bytes(dtype) if dtype else None
    if not shape or not size or not peak_tflops or not peak_memory_tbps:
        return None
    m, n, k = shape
    intensity = 2 * m * n * k / gemm_min_bytes(shape, size)
    balance = peak_tflops / peak_memory_tbps
    return {"regime": "memory_bound" if intensity < balance else "compute_bound",
            "arithmetic_intensity": round(intensity, 1), "machine_balance": round(balance, 1)}


def unvalidated_error() -> StaticErrorModel:
    """The error model of a target with no validation set: the widest figures, nothing validated."""
    return StaticErrorModel(WIDEST_LOG_SIGMA, "no validation set on this target: the widest error of any "
                            "target's static model (evaluator.static_error)", 0, (), WIDEST_LOG_PENALTY)


@dataclass(frozen=True)
class PairError:
    """What a validation set says about ratios: `derive_error` over its rows."""

    log_sigma: float      # 1.4826 x median |error|: the normal scale, robust to outliers
    rms: float            # root-mean-square error, outliers included (reported beside it)
    p90: float            # 90th percentile |error|: the widening for a gain on an unvalidated mechanism
    worst: float
    pairs: int


def derive_error(rows: list[tuple[float, float]], tie: float = 0.0) -> PairError:
    """The ratio error of (estimate, reference) rows over all their pairs; pairs whose references differ by less
    than `tie` (relative) are left out, as the pairwise-accuracy rule leaves them out."""
    logs = [(math.log(e), math.log(r)) for e, r in rows if e and r and e > 0 and r > 0]
    errors = []
    for i in range(len(logs)):
        for j in range(i + 1, len(logs)):
            if abs(math.exp(logs[i][1] - logs[j][1]) - 1) < tie:
                continue
            errors.append((logs[i][0] - logs[j][0]) - (logs[i][1] - logs[j][1]))
    return pair_error(errors)


def pair_error(errors: list[float]) -> PairError:
    """The scales of a list of log ratio errors (estimated over reference), one per pair."""
    if not errors:
        raise ValueError("no pairs to derive a ratio error from")
    rms = math.sqrt(sum(e * e for e in errors) / len(errors))
    size = sorted(abs(e) for e in errors)
    mid = len(size) // 2
    median = size[mid] if len(size) % 2 else (size[mid - 1] + size[mid]) / 2
    p90 = size[min(len(size) - 1, math.ceil(0.9 * len(size)) - 1)]
    return PairError(1.4826 * median, rms, p90, size[-1], len(errors))


@dataclass(frozen=True)
class StaticSpeedup:
    """The estimated candidate/incumbent ratio on one shape, with the model's interval: static estimates."""

    point: float
    low: float
    high: float
    unvalidated: tuple[str, ...]        # mechanisms the gain involves that the target has not validated
    basis: str
    memory_bound: str = ""              # the source of the memory-bound regime's error, where it was used

    def to_dict(self) -> dict:
        return {"kind": "static_estimate", **asdict(self), "unvalidated": list(self.unvalidated)}


def _features(static: dict) -> dict:
    tp = static.get("throughput") or {}
    model = static.get("model") or {}
    work = model.get("work") or {}
    return {"streams": (tp.get("streams_per_pipe"), tp.get("resident_ctas")), "bound": tp.get("shared_bound"),
            "warp_specialized": work.get("warp_specialized"), "persistent": work.get("persistent"),
            "spill_level": (model.get("spills") or {}).get("level")}


def mechanisms_changed(candidate_static: dict, incumbent_static: dict) -> tuple[str, ...]:
    """The mechanisms of `MECHANISMS` that differ between two static sections (what the estimated gain may rest
    on beyond one stream's loop)."""
    new, old = _features(candidate_static), _features(incumbent_static)
    found = []
    if new["streams"] != old["streams"]:
        found.append("resident_streams")
    if new["spill_level"] != old["spill_level"]:
        found.append("spills")
    for key in ("warp_specialized", "persistent"):
        if new[key] != old[key]:
            found.append("warp_specialization" if key == "warp_specialized" else key)
    if new["bound"] != old["bound"]:
        found += [_BOUND_MECHANISM[b] for b in (new["bound"], old["bound"]) if b in _BOUND_MECHANISM]
    return tuple(sorted(set(found)))


def error_model_of(static: dict) -> StaticErrorModel | None:
    data = (static.get("throughput") or {}).get("ratio_error")
    return StaticErrorModel.from_dict(data) if data else None


def static_speedup(candidate_static: dict, incumbent_static: dict) -> StaticSpeedup:
    """Candidate over incumbent `estimated_tflops` on one shape, with the interval the target's ratio error gives
    (the error model the candidate's record carries; without one, `unvalidated_error`)."""
    new, old = candidate_static.get("estimated_tflops"), incumbent_static.get("estimated_tflops")
    if not new or not old or new <= 0 or old <= 0:
        raise ValueError(f"static_speedup needs two positive estimates, got {new} and {old}")
    error = error_model_of(candidate_static) or error_model_of(incumbent_static) or unvalidated_error()
    point = new / old
    mechanisms = list(mechanisms_changed(candidate_static, incumbent_static))
    sigma, source, memory_bound = error.log_sigma, f"{error.source} ({error.pairs} pairs)", ""
    if any(((s.get("throughput") or {}).get("regime") or {}).get("regime") == "memory_bound"
           for s in (candidate_static, incumbent_static)):
        if error.memory_bound_log_sigma is None:
            mechanisms.append("memory_bound_regime")
        else:
            sigma = max(sigma, error.memory_bound_log_sigma)
            source = memory_bound = error.memory_bound_source
    unvalidated = tuple(m for m in mechanisms if m not in error.validated_mechanisms)
    half = error.z * sigma + (error.unvalidated_log_penalty if unvalidated else 0.0)
    basis = f"static estimates {new:.1f} / {old:.1f} TFLOP/s; ratio error log-sigma {sigma:.3f} x z {error.z} from {source}"
    if unvalidated:
        basis += (f"; the change involves {', '.join(unvalidated)}, not validated on this target: the interval is "
                  f"widened by the 90th-percentile ratio error seen ({error.unvalidated_log_penalty:.3f} in log)")
    return StaticSpeedup(point, point * math.exp(-half), point * math.exp(half), unvalidated, basis, memory_bound)
