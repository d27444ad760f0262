"""A sweep's pictures (matplotlib, Agg backend, no display), each as deterministic PNG bytes (no
software or date in the metadata): latency against each axis per method, speed-up over naive,
a heat map when there are two axes, the Pareto front of latency against total PIM lanes."""

from __future__ import annotations

import io
import re

from .report import NAIVE, Table, baseline_series

COST_LABEL = "cost proxy: total PIM lanes (channels × PIM units per channel × lanes)"


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams["svg.hashsalt"] = "pimsat"
    return plt


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    _plt().close(fig)
    return buf.getvalue()


def _number(v: str) -> float | None:
    try:
        return float(v)
    except ValueError:
        return None


def _x(values: list[str]) -> tuple[list[float], bool]:
    """Positions for axis values: the numbers themselves, or 0, 1, ... for categories."""
    nums = [_number(v) for v in values]
    if all(n is not None for n in nums):
        return nums, True
    return list(range(len(values))), False


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")


def _line_plot(
    rows: list[dict], axis: str, series: dict[str, str], title: str, ylabel: str, bound: bool = False
) -> bytes:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    values = [str(r[axis]) for r in rows]
    xs, numeric = _x(values)
    for label, col in series.items():
        pts = [(x, r[col]) for x, r in zip(xs, rows) if r.get(col) is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
    pts = [(x, r["hardware_bound_cycles"]) for x, r in zip(xs, rows) if bound and r.get("hardware_bound_cycles")]
    if pts:
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "k--", lw=1, label="hardware bound")
    if numeric and min(xs) > 0 and max(xs) >= 4 * min(xs):
        ax.set_xscale("log", base=2)
    if not numeric or len(xs) <= 8:
        ax.set_xticks(xs, values)
        ax.minorticks_off()
    ax.set_xlabel(axis)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _png(fig)


def figures(table: Table, axes: dict[str, list[str]], methods: list[str], zipped: bool) -> list[tuple[str, str, bytes]]:
    """(file stem, caption, PNG) for every plot of the sweep."""
    out = []
    instances = list(dict.fromkeys(r["instance"] for r in table.rows))
    for inst in instances:
        for axis in axes:
            rows = (
                [r for r in table.rows if r["instance"] == inst] if zipped else baseline_series(table, axes, axis, inst)
            )
            if not rows:
                continue
            fixed = ", ".join(f"{a} = {vs[0]}" for a, vs in axes.items() if a != axis)
            others = "" if zipped or not fixed else f" ({fixed})"
            cap = f"{inst}: latency vs {axis}{others}"
            title = cap.replace(" (", "\n(")
            png = _line_plot(rows, axis, {m: f"{m}_cycles" for m in methods}, title, "cycles", bound=True)
            out.append((f"latency-{slug(inst)}-{slug(axis)}", cap, png))
            if NAIVE in methods and len(methods) > 1:
                cap = f"{inst}: speed-up over naive vs {axis}{others}"
                series = {m: f"speedup_{m}" for m in methods if m != NAIVE}
                png = _line_plot(rows, axis, series, cap.replace(" (", "\n("), "naive cycles / method cycles")
                out.append((f"speedup-{slug(inst)}-{slug(axis)}", cap, png))
        if len(axes) == 2 and not zipped:
            for m in methods:
                png = _heat_map(table, axes, inst, m)
                if png is not None:
                    a, b = axes
                    out.append((f"heatmap-{slug(inst)}-{m}", f"{inst}: {m} cycles over {a} × {b}", png))
        png = _pareto(table, inst, methods)
        if png is not None:
            out.append((f"pareto-{slug(inst)}", f"{inst}: Pareto front of latency vs total PIM lanes", png))
    return out


def _heat_map(table: Table, axes: dict[str, list[str]], inst: str, method: str) -> bytes | None:
    import numpy as np

    (a, avals), (b, bvals) = axes.items()
    grid = np.full((len(avals), len(bvals)), np.nan)
    for r in table.rows:
        if r["instance"] == inst and r.get(f"{method}_cycles") is not None:
            grid[avals.index(r[a]), bvals.index(r[b])] = r[f"{method}_cycles"]
    if np.isnan(grid).all():
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    im = ax.imshow(grid, cmap="viridis_r", aspect="auto")
    ax.set_xticks(range(len(bvals)), bvals)
    ax.set_yticks(range(len(avals)), avals)
    ax.set_xlabel(b)
    ax.set_ylabel(a)
    lo, hi = np.nanmin(grid), np.nanmax(grid)
    for i in range(len(avals)):
        for j in range(len(bvals)):
            v = grid[i, j]
            text = "—" if np.isnan(v) else f"{int(v):,}"
            light = np.isnan(v) or hi == lo or (v - lo) / (hi - lo) < 0.5  # viridis_r: low values are yellow
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color="black" if light else "white")
    fig.colorbar(im, ax=ax, label=f"{method} cycles")
    ax.set_title(f"{inst}: {method} cycles", fontsize=10)
    fig.tight_layout()
    return _png(fig)


def pareto_front(points: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(cost, cycles) pairs no other pair beats in both (ties kept once), by cost."""
    front: list[tuple[int, int]] = []
    for cost, cycles in sorted(set(points)):
        if not front or cycles < front[-1][1]:
            front.append((cost, cycles))
    return front


def _pareto(table: Table, inst: str, methods: list[str]) -> bytes | None:
    best = []
    for r in table.rows:
        cs = [r[f"{m}_cycles"] for m in methods if r["instance"] == inst and r.get(f"{m}_cycles") is not None]
        if cs:
            best.append((int(r["total_lanes"]), min(cs)))
    if not best:
        return None
    front = pareto_front(best)
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    ax.scatter([c for c, _ in best], [y for _, y in best], label="points (best method)", alpha=0.6)
    ax.step([c for c, _ in front], [y for _, y in front], where="post", color="C3", marker="o", label="Pareto front")
    if max(c for c, _ in best) >= 4 * min(c for c, _ in best):
        ax.set_xscale("log", base=2)
    ax.set_xlabel(COST_LABEL, fontsize=8)
    ax.set_ylabel("cycles")
    ax.set_title(f"{inst}: latency vs cost", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _png(fig)
