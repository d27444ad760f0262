"""A sweep's results as tables: one row per point (`results.csv`: every method's cycles, status and
gaps, the hardware bound, each of its terms and the binding one), the sensitivity table (what one
step of an axis changes), and the self-contained `report.html` (tables + plots as base64 PNG).

Everything here is a function of the points and their records, sorted by point index: the files
do not depend on the worker count, the arrival order or a resume. No wall-clock figure goes in.
"""

from __future__ import annotations

import base64
import csv
import html
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hwmodel.atomic import atomic_open
from solver.problem import Method

from .run import Outcome
from .spec import Point

CSV_NAME, HTML_NAME, PLOTS_DIR = "results.csv", "report.html", "plots"
NAIVE = str(Method.NAIVE)


@dataclass(frozen=True)
class Table:
    columns: list[str]
    rows: list[dict[str, Any]]


def axis_values(points: list[Point]) -> dict[str, list[str]]:
    """Each axis and its values in sweep order."""
    out: dict[str, list[str]] = {}
    for p in points:
        for path, v in p.coords:
            if v not in out.setdefault(path, []):
                out[path].append(v)
    return out


def _cycles(rec: dict | None) -> int | None:
    return rec["report"]["simulated_cycles"] if rec and rec["outcome"] == Outcome.DONE else None


def point_table(points: list[Point], done: dict[str, dict]) -> Table:
    """One row per point that has a record, in point order."""
    methods = list(points[0].options.methods) if points else []
    fields = ["gap", "hardware_gap", "utilization"] + (
        ["outputs_match", "bit_exact"] if points[0].options.functional else []
    )
    axes = list(axis_values(points))
    terms: list[str] = []
    rows = []
    for p in points:
        recs = {m: done.get(k) for m, k in p.keys}
        if all(r is None for r in recs.values()):
            continue
        rep = next((r["report"] for r in recs.values() if r and r["outcome"] == Outcome.DONE), None)
        row: dict[str, Any] = {"point": p.index, "instance": p.instance["name"], **dict(p.coords)}
        row.update(hardware=p.hardware, total_lanes=p.total_lanes)
        row["hardware_bound_cycles"] = rep["hardware_bound_cycles"] if rep else None
        for term, c in (rep["bound_terms"] if rep else {}).items():
            row[f"bound_{term}"] = c
            if term not in terms:
                terms.append(term)
        row["binding_term"] = rep["binding_term"] if rep else None
        for m, r in recs.items():
            rm = r["report"] if r and r["outcome"] == Outcome.DONE else None
            row[f"{m}_status"] = None if r is None else (rm["status"] if rm else r["outcome"])
            row[f"{m}_cycles"] = _cycles(r)
            for f in fields:
                row[f"{m}_{f}"] = rm[f] if rm else None
        if NAIVE in recs:
            base = _cycles(recs[NAIVE])
            for m in methods:
                if m != NAIVE:
                    c = row[f"{m}_cycles"]
                    row[f"speedup_{m}"] = round(base / c, 4) if base and c else None
        row["message"] = "; ".join(f"{m}: {r['message']}" for m, r in recs.items() if r and r["message"]) or None
        rows.append(row)
    cols = ["point", "instance", *axes, "hardware", "total_lanes", "hardware_bound_cycles"]
    cols += [f"bound_{t}" for t in terms] + ["binding_term"]
    cols += [f"{m}_{f}" for m in methods for f in ("status", "cycles", *fields)]
    cols += [f"speedup_{m}" for m in methods if m != NAIVE and NAIVE in methods] + ["message"]
    return Table(cols, rows)


def csv_text(table: Table) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=table.columns, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows(table.rows)
    return buf.getvalue()


def write_file(path: Path, data: str | bytes) -> None:
    """Atomically (hwmodel.atomic): a reader sees the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path, binary=isinstance(data, bytes)) as f:
        f.write(data)


def write_csv(out: Path, points: list[Point], done: dict[str, dict]) -> Table:
    table = point_table(points, done)
    write_file(Path(out) / CSV_NAME, csv_text(table))
    return table


def baseline_series(table: Table, axes: dict[str, list[str]], axis: str, instance: str) -> list[dict]:
    """The rows of `instance` along `axis`, every other axis at its first value, in axis order."""
    first = {a: vs[0] for a, vs in axes.items() if a != axis}
    rows = [r for r in table.rows if r["instance"] == instance and all(r[a] == v for a, v in first.items())]
    return sorted(rows, key=lambda r: axes[axis].index(r[axis]))


def sensitivity(table: Table, axes: dict[str, list[str]], methods: list[str], zipped: bool) -> Table:
    """Per axis (others at their first value; with --zip all axes step together, in point order)
    and method: the cycles before and after each step, the change, and the binding term of the
    hardware bound before and after."""
    rows = []
    instances = list(dict.fromkeys(r["instance"] for r in table.rows))
    series: list[tuple[str, str, list[dict]]] = []
    for inst in instances:
        if zipped and axes:
            name = " + ".join(axes)
            series.append((inst, name, [r for r in table.rows if r["instance"] == inst]))
        else:
            series += [(inst, a, baseline_series(table, axes, a, inst)) for a in axes]
    for inst, name, rs in series:
        paths = list(axes) if zipped else [name]
        for a, b in zip(rs, rs[1:]):
            step = f"{'/'.join(str(a[p]) for p in paths)} → {'/'.join(str(b[p]) for p in paths)}"
            for m in methods:
                ca, cb = a[f"{m}_cycles"], b[f"{m}_cycles"]
                delta = cb - ca if ca is not None and cb is not None else None
                rows.append(
                    {
                        "instance": inst,
                        "axis": name,
                        "step": step,
                        "method": m,
                        "cycles_before": ca,
                        "cycles_after": cb,
                        "delta_cycles": delta,
                        "delta_pct": round(100 * delta / ca, 2) if delta is not None and ca else None,
                        "binding": f"{a['binding_term']} → {b['binding_term']}",
                    }
                )
    cols = ["instance", "axis", "step", "method", "cycles_before", "cycles_after", "delta_cycles", "delta_pct"]
    return Table(cols + ["binding"], rows)


def _html_table(table: Table) -> str:
    def cell(v):
        return "" if v is None else html.escape(f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v))

    head = "".join(f"<th>{html.escape(c)}</th>" for c in table.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{cell(r.get(c))}</td>" for c in table.columns) + "</tr>\n" for r in table.rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>\n{body}</tbody></table>"


def html_report(
    title: str, summary: list[str], tables: list[tuple[str, Table]], figures: list[tuple[str, bytes]]
) -> str:
    """One self-contained page: the summary lines, the tables, every figure inlined (base64 PNG)."""
    parts = [
        "<!DOCTYPE html>",
        '<html><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;font-size:12px;"
        "margin-bottom:2em}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
        "th{background:#eee}img{max-width:100%;border:1px solid #ddd;margin:0.5em 0}</style>",
        "</head><body>",
        f"<h1>{html.escape(title)}</h1>",
    ]
    parts += [f"<p>{html.escape(line)}</p>" for line in summary]
    for caption, table in tables:
        parts += [f"<h2>{html.escape(caption)}</h2>", _html_table(table)]
    if figures:
        parts.append("<h2>Figures</h2>")
    for caption, png in figures:
        data = base64.b64encode(png).decode("ascii")
        parts += [
            f"<h3>{html.escape(caption)}</h3>",
            f'<img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">',
        ]
    parts.append("</body></html>\n")
    return "\n".join(parts)
