"""`nearpeak ladder`: every reference stage of a target, evaluated statically, beside published figures."""
from __future__ import annotations

import json
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from .contract import read_constant
from .published import CORRELATION_STAGES, published
from .report import pct, table
from .stats import spearman

KERNELS_DIR = Path(__file__).resolve().parents[1] / "kernels"
LADDER_DIRS = {"gfx950": ("gfx950/fp16", "gfx950/bf8", "gfx950/mxfp4"), "sm90": ("sm90/bf16", "sm90/fp8")}


def stage_files(target: str) -> list[Path]:
    files = []
    for sub in LADDER_DIRS[target]:
        files += sorted(p for p in (KERNELS_DIR / sub).glob("v*.py"))
    return files


def _evaluate(path: str, target: str, run: bool) -> dict:
    from .api import evaluate

    return evaluate(path, target=target, run=run if run else False)


def ladder_records(target: str, run: bool = False, jobs: int = 1, progress=None) -> list[dict]:
    files = stage_files(target)
    if jobs > 1 and not run:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            results = list(pool.map(_evaluate, [str(f) for f in files], [target] * len(files), [run] * len(files)))
    else:
        results = []
        for n, f in enumerate(files, 1):
            if progress:
                progress(f"[{n}/{len(files)}] {f.relative_to(KERNELS_DIR)}")
            results.append(_evaluate(str(f), target, run))
    rows = []
    for f, record in zip(files, results):
        stage = read_constant(f, "STAGE") or f.stem.split("_")[0]
        pub = published(target, stage) or published(target, stage.split("-")[0])
        st = record.get("static") or {}
        rt = record.get("runtime") or {}
        rows.append({
            "stage": stage, "file": str(f.relative_to(KERNELS_DIR.parent)), "technique": read_constant(f, "TECHNIQUE"),
            "status": record["status"], "message": record.get("message"),
            **{k: v for k, v in st.items() if k not in ("hot_loop", "kernels", "estimate")},
            "mfma_per_k_iteration": (st.get("hot_loop") or {}).get("mfma") if target == "gfx950" else None,
            "matrix_per_k_iteration": (st.get("hot_loop") or {}).get("wgmma" if target == "sm90" else "mfma"),
            "estimated_efficiency": st.get("estimated_efficiency"),
            "estimate_kind": "static_estimate",
            "published_tflops": pub.get("tflops"), "published_mfma_efficiency": pub.get("mfma_efficiency"),
            "measured_tflops": rt.get("tflops"), "measured_ratio_vs_vendor": rt.get("ratio_vs_vendor"),
            "measured_correct": rt.get("correct"),
        })
    return rows


def correlation(rows: list[dict]) -> dict:
    pairs = [(r["estimated_efficiency"], r["published_mfma_efficiency"]) for r in rows
             if r["stage"] in CORRELATION_STAGES and r.get("estimated_efficiency") is not None
             and r.get("published_mfma_efficiency") is not None]
    rho = spearman([p[0] for p in pairs], [p[1] for p in pairs]) if len(pairs) >= 2 else None
    return {"spearman_rho": None if rho is None else round(rho, 3), "stages": [r["stage"] for r in rows
            if r["stage"] in CORRELATION_STAGES], "n": len(pairs),
            "between": "static estimated_efficiency and the seed's published MFMA efficiency"}


def _fixed(value, digits: int) -> str | None:
    return None if value is None else f"{value:.{digits}f}"


def render(target: str, rows: list[dict], corr: dict | None) -> str:
    if target == "gfx950":
        headers = ["stage", "technique", "VGPR", "AGPR", "SGPR", "spills", "loop spills", "LDS KiB", "occ",
                   "MFMA/iter", "est. eff", "pub TFLOPS", "pub MFMA eff"]
        body = [[r["stage"], (r["technique"] or "")[:34], r.get("arch_vgprs"), r.get("agprs"), r.get("sgprs"),
                 r.get("spills"), r.get("hot_loop_spills"),
                 None if r.get("lds_bytes") is None else round(r["lds_bytes"] / 1024, 1), r.get("occupancy"),
                 r.get("matrix_per_k_iteration"), pct(r.get("estimated_efficiency")), r.get("published_tflops"),
                 pct(r.get("published_mfma_efficiency"))] if r["status"] == "ok"
                else [r["stage"], f"{r['status']}: {r['message']}"[:60]] + [None] * 11 for r in rows]
    else:
        headers = ["stage", "technique", "regs", "spill B", "loop spills", "smem KiB", "wgmma/iter", "est. eff",
                   "TFLOPS", "x vendor", "correct"]
        body = [[r["stage"], (r["technique"] or "")[:34], r.get("registers"), r.get("spills"), r.get("hot_loop_spills"),
                 None if r.get("shared_bytes") is None else round(r["shared_bytes"] / 1024, 1),
                 r.get("matrix_per_k_iteration"), pct(r.get("estimated_efficiency")),
                 _fixed(r.get("measured_tflops"), 1), _fixed(r.get("measured_ratio_vs_vendor"), 3),
                 r.get("measured_correct")] if r["status"] == "ok"
                else [r["stage"], f"{r['status']}: {r['message']}"[:60]] + [None] * 9 for r in rows]
    out = [table(body, headers), "",
           "est. eff = STATIC ESTIMATE of matrix-unit busy fraction in the hot loop (docs/static-model.md)."]
    if target == "gfx950":
        out.append("pub = the seed authors' figures measured on an MI355X with custom Triton builds, not nearpeak's.")
    if corr and corr.get("n"):
        out.append(f"Spearman rho over {', '.join(corr['stages'])} (static estimate vs published MFMA efficiency): "
                   f"{corr['spearman_rho']}")
    return "\n".join(out)


def ladder_main(args) -> int:
    files = stage_files(args.target)
    if not files:
        print(f"nearpeak ladder: no stages found under {KERNELS_DIR}/{LADDER_DIRS[args.target][0]}", file=sys.stderr)
        return 2
    rows = ladder_records(args.target, run=args.run, jobs=args.jobs,
                          progress=lambda msg: print(msg, file=sys.stderr, flush=True))
    corr = correlation(rows) if args.target == "gfx950" else None
    if args.json:
        print(json.dumps({"target": args.target, "stages": rows, "correlation": corr}, indent=2, default=str))
    else:
        print(render(args.target, rows, corr))
    return 0 if all(r["status"] == "ok" for r in rows) else 1
