"""Headline figures of an evaluation record, each labelled with how it was obtained.

Figures travel into commit trailers, progress lines and history tables. A figure read from a GPU run is
*measured*; one computed from the compiler's output by a model is a *static estimate*; register, spill and
LDS/shared counts are what the compiler reported (exact, not estimates). The labels are part of the names
(`Efficiency-Estimate` vs `Efficiency-Measured`) so no reader can mistake one for the other.
"""
from __future__ import annotations

from dataclasses import dataclass

NO_GPU = "none (compile-only on CPU)"
# The record's static figures fixed by the compiler's output for a given source: what the prompt shows and
# what `replay --verify` requires to reproduce exactly.
STATIC_KEYS = ("registers", "spills", "hot_loop_spills", "shared_bytes", "occupancy", "matrix_instructions",
               "estimated_efficiency", "estimated_tflops", "useful_fraction")


@dataclass(frozen=True)
class Figures:
    """The numbers a person looks at first, from one evaluation record."""

    status: str
    tflops_measured: float | None
    efficiency_measured: float | None
    vs_vendor_measured: float | None
    efficiency_estimate: float | None
    tflops_estimate: float | None     # the static objective: useful TFLOP/s of the whole kernel, estimated
    registers: int | None
    spills: int | None
    hot_loop_spills: int | None
    shared_bytes: int | None
    occupancy: int | None
    correct: bool | None
    device: str
    timing_method: str

    @property
    def measured(self) -> bool:
        return self.tflops_measured is not None


def figures(record: dict) -> Figures:
    static = record.get("static") or {}
    runtime = record.get("runtime") or {}
    return Figures(
        status=record.get("status", "unknown"),
        tflops_measured=runtime.get("tflops"),
        efficiency_measured=runtime.get("efficiency"),
        vs_vendor_measured=runtime.get("ratio_vs_vendor"),
        efficiency_estimate=static.get("estimated_efficiency"),
        tflops_estimate=static.get("estimated_tflops"),
        registers=static.get("registers"),
        spills=static.get("spills"),
        hot_loop_spills=static.get("hot_loop_spills"),
        shared_bytes=static.get("shared_bytes"),
        occupancy=static.get("occupancy"),
        correct=runtime.get("correct"),
        device=runtime.get("device") or NO_GPU,
        timing_method=runtime.get("timing_method") or "none (static estimate only)",
    )


def _num(value, digits: int = 4) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def trailers(record: dict, *, step: int, candidate: int, verdict: str, reason: str, proposer: str, seed: int,
             extra: dict[str, str] | None = None) -> dict[str, str]:
    """The trailer block of a ledger commit, in a fixed order (docs/ledger-format.md)."""
    f = figures(record)
    out = {"Step": str(step), "Candidate": str(candidate), "Verdict": verdict, "Reason": _one_line(reason) or "-",
           "Proposer": proposer, "Status": f.status}
    out["TFLOPS-Measured"] = _num(f.tflops_measured) if f.measured else "n/a (no GPU run)"
    if f.efficiency_measured is not None:
        out["Efficiency-Measured"] = _num(f.efficiency_measured)
    if f.vs_vendor_measured is not None:
        out["Vs-Vendor-Measured"] = _num(f.vs_vendor_measured)
    out["Efficiency-Estimate"] = _num(f.efficiency_estimate)
    if f.tflops_estimate is not None:
        out["TFLOPS-Estimate"] = _num(f.tflops_estimate)
    out["Registers"] = _num(f.registers)
    out["Spills"] = _num(f.spills)
    out["Hot-Loop-Spills"] = _num(f.hot_loop_spills)
    out["Shared"] = _num(f.shared_bytes) + (" bytes" if f.shared_bytes is not None else "")
    if f.correct is not None:
        out["Correct-Measured"] = "yes" if f.correct else "no"
    out.update({"Target": str(record.get("target")), "Triton-Version": str(record.get("triton_version")),
                "Device": f.device, "Timing-Method": f.timing_method, "Seed": str(seed)})
    out.update({k: _one_line(v) for k, v in (extra or {}).items()})
    return out


TRAILER_LIMIT = 300   # characters of one trailer value; step.json keeps the whole text


def _one_line(text: str) -> str:
    return " ".join(str(text).split())[:TRAILER_LIMIT]


def commit_message(summary: str, rationale: str, trailer_block: dict[str, str]) -> str:
    """One-line summary, the proposer's rationale, then the trailers."""
    body = rationale.strip() or "(no rationale given)"
    lines = "\n".join(f"{k}: {v}" for k, v in trailer_block.items())
    return f"{_one_line(summary)[:120]}\n\n{body}\n\n{lines}\n"


def headline(record: dict) -> str:
    """A short human line: measured figures when there are any, else the static estimate, named so."""
    f = figures(record)
    if f.status != "ok":
        return f.status
    parts = []
    if f.measured:
        parts.append(f"{_num(f.tflops_measured)} TFLOPS (measured)")
    if not f.measured and f.tflops_estimate is not None:
        parts.append(f"{_num(f.tflops_estimate)} TFLOPS (static est.)")
    parts.append(f"eff {_num(f.efficiency_estimate, 3)} (static est.)")
    parts.append(f"regs {_num(f.registers)}")
    parts.append(f"spills {_num(f.spills)}")
    parts.append(f"shared {_num(f.shared_bytes)} B")
    return ", ".join(parts)
