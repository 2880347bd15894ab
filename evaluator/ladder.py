"""`nearpeak ladder`: every reference stage of a target, evaluated statically, beside published figures."""
from __future__ import annotations

import json
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from .api import evaluate
from .contract import read_constant
from .report import clip, pct, table
from .stats import spearman
from .targets import get_target

KERNELS_DIR = Path(__file__).resolve().parents[1] / "kernels"


def ladder_dirs(target: str) -> list[Path]:
    """The target's reference-stage folders, kernels/<target>/<folder>, its main ladder first."""
    return [KERNELS_DIR / target / folder for folder in get_target(target).ladder.folders]


def stage_paths(directory: Path) -> list[Path]:
    """The stage files `vNN_*.py` of one ladder folder, in order: the one way stages are discovered."""
    return sorted(directory.glob("v[0-9][0-9]_*.py"))


def stage_files(target: str) -> list[Path]:
    """Every reference stage of the target, ladder by ladder."""
    return [path for directory in ladder_dirs(target) for path in stage_paths(directory)]


def _evaluate(path: str, target: str, run: bool) -> dict:
    return evaluate(path, target=target, run=run if run else False)


def ladder_records(target: str, run: bool = False, jobs: int = 1, progress=None) -> list[dict]:
    """One row per reference stage: its static figures, published figures, and measured ones when `run`."""
    tgt = get_target(target)
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
        pub = tgt.published(stage)
        st = record.get("static") or {}
        rt = record.get("runtime") or {}
        rows.append({
            "stage": stage, "file": str(f.relative_to(KERNELS_DIR.parent)), "technique": read_constant(f, "TECHNIQUE"),
            "status": record["status"], "message": record.get("message"),
            **{k: v for k, v in st.items() if k not in ("hot_loop", "kernels", "estimate", "model", "throughput")},
            "matrix_per_k_iteration": _matrix_per_iteration(st.get("hot_loop"), tgt.toolchain.loop_matrix_keys),
            "estimated_efficiency": st.get("estimated_efficiency"),
            "estimate_kind": "static_estimate",
            "published_tflops": pub.get("tflops"), "published_mfma_efficiency": pub.get("mfma_efficiency"),
            "measured_tflops": rt.get("tflops"), "measured_ratio_vs_vendor": rt.get("ratio_vs_vendor"),
            "measured_correct": rt.get("correct"),
        })
    return rows


def correlation(rows: list[dict], stages: tuple[str, ...] | None, estimate: str, reference: str) -> dict:
    """Spearman's rho between a static estimate and a reference figure over `stages` (None: every stage with
    both figures), with the number of stages it covers."""
    pairs = [(r["stage"], r[estimate], r[reference]) for r in rows
             if (stages is None or r["stage"] in stages) and r.get(estimate) is not None
             and r.get(reference) is not None]
    rho = spearman([p[1] for p in pairs], [p[2] for p in pairs]) if len(pairs) >= 3 else None
    return {"spearman_rho": None if rho is None else round(rho, 3), "stages": [p[0] for p in pairs],
            "n": len(pairs), "between": f"static {estimate} and {reference}"}


def correlations(target: str, rows: list[dict]) -> list[dict]:
    """The ranking checks a ladder table can show: the estimate against published figures (every published
    stage) and, after `--run`, the estimated TFLOP/s against the measured ones."""
    stages = get_target(target).ladder.correlation_stages or None
    out = []
    if get_target(target).ladder.published:
        # The main ladder alone as well (its first folder: one dtype, one technique per stage), when the
        # published set also holds other folders' kernels.
        main_dir = ladder_dirs(target)[0]
        main = tuple(r["stage"] for r in rows if (KERNELS_DIR.parent / r["file"]).parent == main_dir
                     and (stages is None or r["stage"] in stages))
        covered = {r["stage"] for r in rows if stages is None or r["stage"] in stages}
        sets = [stages, main] if main and set(main) != covered else [stages]
        out += [correlation(rows, chosen, estimate, reference) for chosen in sets
                for estimate, reference in (("estimated_efficiency", "published_mfma_efficiency"),
                                            ("estimated_tflops", "published_tflops"))]
    out.append(correlation(rows, None, "estimated_tflops", "measured_tflops"))
    return [c for c in out if c["n"]]


def _matrix_per_iteration(hot_loop: dict | None, keys: tuple[str, ...]) -> int | None:
    """Matrix instructions per hot-loop iteration, over every matrix class of the target's ISA."""
    return sum(hot_loop.get(k, 0) for k in keys) if hot_loop else None


def _fixed(value, digits: int) -> str | None:
    return None if value is None else f"{value:.{digits}f}"


TECHNIQUE_WIDTH = 40
FAR_FROM_PUBLISHED = 0.25   # an estimate this far (relative) from the published TFLOP/s gets a note


def estimate_note(row: dict) -> str:
    """A note for an estimate far from the published figure: how far, and the cause when the record shows one
    (spills in the hot loop, which the model charges as memory traffic and a faster build may not have)."""
    estimate, published = row.get("estimated_tflops"), row.get("published_tflops")
    if not estimate or not published or abs(estimate / published - 1) <= FAR_FROM_PUBLISHED:
        return ""
    note = f"est. {abs(estimate / published - 1):.0%} {'below' if estimate < published else 'above'} pub"
    spills = row.get("hot_loop_spills")
    if spills and estimate < published:
        note += f"; {spills} hot-loop spills in this compile, charged by the model"
    return note


def render(target: str, rows: list[dict], corrs: list[dict]) -> str:
    """The ladder as a text table: the target's own columns, the estimate, then published or measured figures,
    and a note where an estimate is far from its published figure."""
    tgt = get_target(target)
    published = bool(tgt.ladder.published)
    columns = [("stage", lambda r: r["stage"]), ("technique", lambda r: clip(r["technique"] or "", TECHNIQUE_WIDTH)),
               *tgt.toolchain.ladder_columns, ("est. eff", lambda r: pct(r.get("estimated_efficiency"))),
               ("est. TF/s", lambda r: _fixed(r.get("estimated_tflops"), 0))]
    if published:
        columns += [("pub TF/s", lambda r: _fixed(r.get("published_tflops"), 0)),
                    ("pub MFMA eff", lambda r: pct(r.get("published_mfma_efficiency")))]
    else:
        columns += [("meas. TF/s", lambda r: _fixed(r.get("measured_tflops"), 0)),
                    ("x vendor", lambda r: _fixed(r.get("measured_ratio_vs_vendor"), 3)),
                    ("correct", lambda r: r.get("measured_correct"))]
    notes = [estimate_note(r) if r["status"] == "ok" else "" for r in rows]
    if any(notes):
        columns.append(("note", None))
    left = (0, 1, len(columns) - 1) if any(notes) else (0, 1)
    body = []
    for r, note in zip(rows, notes):
        if r["status"] == "ok":
            body.append([value(r) for _, value in columns if value] + ([note] if any(notes) else []))
        else:
            body.append([r["stage"], clip(f"{r['status']}: {r['message']}", 60)] + [None] * (len(columns) - 2))
    out = [table(body, [header for header, _ in columns], left=left), "",
           ("est. eff = STATIC ESTIMATE of matrix-unit busy fraction in the hot loop; est. TF/s = STATIC ESTIMATE of "
           "useful TFLOP/s of the whole kernel at the benchmark shape (docs/static-model.md)."),
           tgt.toolchain.ladder_legend]
    if published:
        out.append(f"pub = {tgt.ladder.published_by}.")
    else:
        out.append("meas. TF/s, x vendor, correct = MEASURED by nearpeak ladder --run on this machine's GPU "
                   "(empty without --run).")
    if not tgt.verified_on_hardware:
        out.append(f"{tgt.name}: nearpeak's runtime path has not yet run on hardware ({', '.join(tgt.devices)}).")
    for corr in corrs:
        out.append(f"Spearman rho, {corr['between']}, n={corr['n']} ({', '.join(corr['stages'])}): "
                   f"{corr['spearman_rho']}")
    return "\n".join(out)


def ladder_main(args) -> int:
    files = stage_files(args.target)
    if not files:
        print(f"nearpeak ladder: no stages found under {ladder_dirs(args.target)[0]}", file=sys.stderr)
        return 2
    if args.run:  # before compiling anything: without the GPU every row would fail, minutes later
        from .errors import NoDeviceError
        from .runtime.device import require_device

        try:
            require_device(args.target, with_smi=False)
        except NoDeviceError as err:
            print(f"nearpeak ladder: --run: {err}", file=sys.stderr)
            return err.exit_code
    rows = ladder_records(args.target, run=args.run, jobs=args.jobs,
                          progress=lambda msg: print(msg, file=sys.stderr, flush=True))
    corrs = correlations(args.target, rows)
    if args.json:
        print(json.dumps({"target": args.target, "stages": rows, "correlations": corrs}, indent=2, default=str))
    else:
        print(render(args.target, rows, corrs))
    return 0 if all(r["status"] == "ok" for r in rows) else 1
