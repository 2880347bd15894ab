"""Human-readable rendering of evaluation records and tables."""
from __future__ import annotations

from .targets import UnknownTargetError, get_target


def table(rows: list[list], headers: list[str], left: tuple[int, ...] = (0,)) -> str:
    """A text table: numbers right-aligned, the columns in `left` (names, text) left-aligned."""
    cells = [[("" if c is None else str(c)) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = lambda r: "  ".join(c.ljust(w) if i in left else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths))).rstrip()
    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def clip(text: str, width: int) -> str:
    """`text` cut to at most `width` characters at a word boundary, ending in an ellipsis when cut."""
    if len(text) <= width:
        return text
    cut = text[:width - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut).rstrip(" ,;:(") + "…"


def pct(x) -> str:
    return "" if x is None else f"{100 * x:.1f}%"


def batch_registers(static: dict) -> str:
    """The batch table's registers cell: per thread, and where the target splits its register file into arch
    VGPRs and AGPRs (AMD's matrix cores), what the total adds up."""
    total = static.get("registers")
    if total is None:
        return ""
    if static.get("agprs") is not None and static.get("arch_vgprs") is not None:
        return f"{total} ({static['arch_vgprs']} VGPR + {static['agprs']} AGPR)"
    return str(total)


def batch_failures(records: list[dict], label) -> list[str]:
    """One line per failed record: where (label and line), the status and the whole reason, never cut."""
    lines = []
    for record in records:
        where = label(record) + (f":{record['line']}" if record.get("line") else "")
        lines.append(f"  {where}: {record.get('status')}: {record.get('message')}")
    return lines


# What every target's static record holds (docs/eval-schema.md): shown when the record's target is unknown.
_COMMON_FIELDS = (
    ("kernel", "kernel", ""), ("grid", "grid", ""), ("registers", "registers", ""), ("spills", "spills", ""),
    ("shared_bytes", "shared memory", "B"), ("occupancy", "occupancy", ""),
    ("matrix_instructions", "matrix instructions", ""),
)


def _fields(target_name) -> tuple:
    try:
        return get_target(target_name).toolchain.report_fields
    except UnknownTargetError:
        return _COMMON_FIELDS


def _value(v, unit: str) -> str:
    if isinstance(v, list):
        v = ", ".join(str(x) for x in v) if v else "-"
    return f"{v} {unit}".strip()


def _foreign_lines(record: dict) -> list[str]:
    """How a foreign file was called: its entry and arguments, import folders, environment, kernel files."""
    if not record.get("entry"):
        return []
    lines = [f"entry {record['entry']}({', '.join(record.get('args') or [])})"]
    if record.get("entry_note"):
        lines.append(record["entry_note"])
    if record.get("import_paths"):
        lines.append("import folders: " + ", ".join(record["import_paths"]))
    if record.get("env"):
        lines.append("environment: " + ", ".join(f"{k}={v}" for k, v in record["env"].items()))
    for skipped in record.get("skipped_at_import") or []:
        lines.append(f"skipped at import: line {skipped['line']} ({skipped['statement']}): {skipped['why']} "
                     f"({skipped['reason']})")
    for moved in record.get("meta_allocations") or []:
        where = f" (in {moved['sibling']})" if moved.get("sibling") else ""
        lines.append(f"allocated on meta instead of {moved['device']}: line {moved['line']} ({moved['statement']})"
                     f"{where}")
    files = (record.get("kernel_provenance") or {}).get("kernel_files")
    if files:
        lines.append("kernels from: " + ", ".join(files))
    return lines


def format_record(record: dict) -> str:
    head = f"{record.get('file')}  target={record.get('target')}  shape={record.get('shape')}"
    if record.get("status") != "ok":
        where = record.get("file") or ""
        if record.get("line"):
            where += f":{record['line']}"
        note = f" ({record['entry_note']})" if record.get("entry_note") else ""
        return f"{where}: {record.get('status')}: {record.get('message')}{note}"
    st = record["static"]
    fields = _fields(record.get("target"))
    lines = [head, f"compiled in {record.get('compile_seconds')} s with triton {record.get('triton_version')}"]
    lines += _foreign_lines(record) + [""]
    lines += [f"  {label:<22} {_value(st.get(key), unit)}" for key, label, unit in fields]
    loop = st.get("hot_loop")
    if loop:
        mix = {k: v for k, v in loop.items() if k not in ("excerpt", "view", "header", "depth") and v}
        lines += ["", f"  hot loop ({loop['instructions']} instructions, header {loop['header']}):"]
        lines += [f"    {k:<20} {v}" for k, v in mix.items() if k != "instructions"]
        lines.append(f"  {'hot_loop_spills':<22} {st.get('hot_loop_spills')}")
        est = st.get("estimate")
        if est:
            lines.append(f"  {'hot-loop efficiency':<22} {pct(st.get('estimated_efficiency'))} "
                         f"(STATIC ESTIMATE, the matrix unit's busy fraction over one hot-loop iteration of one "
                         f"CTA, not of the GPU's peak: {est.get('matrix_cycles_per_iteration')} matrix cycles over "
                         f"{est.get('estimated_iteration_cycles')} estimated cycles per iteration, bound: "
                         f"{est.get('bound')})")
        else:
            lines.append(f"  {'hot-loop efficiency':<22} not estimated: the static model does not cost this loop's "
                         "matrix instructions")
        tp = st.get("throughput")
        if tp:
            limits = ", ".join(tp.get("resident_limited_by") or [])
            lines.append(f"  {'estimated TFLOP/s':<22} {tp['estimated_tflops']:.1f} (STATIC ESTIMATE of the whole kernel: "
                         f"{tp['tiles']} tiles x {tp['iterations_per_tile']} iterations, {tp['resident_ctas']} resident "
                         f"CTA(s) per CU/SM limited by {limits or '-'}, {tp['waves']} round(s); useful fraction "
                         f"{tp['useful_fraction']})")
    else:
        lines.append("  no loop with matrix instructions found")
    if len(st.get("kernels", [])) > 1:
        lines.append(f"\n  {len(st['kernels'])} kernels compiled; the headline is the one with the most matrix work")
    rt = record.get("runtime")
    if rt:
        lines += ["", "  runtime (MEASURED on " + str(rt.get("device")) + "):"]
        for key in ("status", "verdict", "summary", "tflops", "pct_of_peak", "vendor_tflops", "ratio_vs_vendor",
                    "efficiency", "timing_method", "seed"):
            if key in rt and rt[key] is not None:
                lines.append(f"    {key:<20} {rt[key]}")
    if record.get("dumped"):
        lines.append(f"\n  wrote {len(record['dumped'])} files: {', '.join(record['dumped'])}")
    return "\n".join(lines)
