"""What a sweep writes when its points are in: results.csv, plots/*.png and report.html (the
JSON lines are written by the driver as results arrive)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .plots import COST_LABEL, figures
from .report import HTML_NAME, PLOTS_DIR, Table, axis_values, html_report, sensitivity, write_csv, write_file
from .run import Outcome
from .spec import Point


@dataclass(frozen=True)
class Written:
    table: Table
    sensitivity: Table
    figures: list[Path]
    html: Path


def write_results(out: Path, points: list[Point], done: dict[str, dict], *, zipped: bool, title: str) -> Written:
    out = Path(out)
    methods = list(points[0].options.methods)
    axes = axis_values(points)
    table = write_csv(out, points, done)
    sens = sensitivity(table, axes, methods, zipped)
    figs = figures(table, axes, methods, zipped)
    paths = []
    for stem, _, png in figs:
        path = out / PLOTS_DIR / f"{stem}.png"
        write_file(path, png)
        paths.append(path)
    records = [done[k] for p in points for _, k in p.keys if k in done]
    failed = sum(r["outcome"] != Outcome.DONE for r in records)
    basis = "all axes step together (--zip)" if zipped else "one axis at a time, the other axes at their first value"
    summary = [
        f"{len(points)} points × {len(methods)} methods ({', '.join(methods)}); "
        f"{len(records)} results, {failed} infeasible or failed.",
        "Cycles are simulated cycles (equal to the compiler's prediction: verified at every point). "
        "hardware_bound_cycles and its bound_* terms come from the hardware and the op graph only; "
        "binding_term is the largest.",
        f"Sensitivity and line plots: {basis}. Pareto front: {COST_LABEL}.",
    ]
    page = html_report(
        title, summary, [("Points", table), ("Sensitivity (per step of an axis)", sens)], [(c, p) for _, c, p in figs]
    )
    write_file(out / HTML_NAME, page)
    return Written(table, sens, paths, out / HTML_NAME)
