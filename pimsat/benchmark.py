"""`pimsat bench`: every method on every instance of some tiers; figures and ratios, side by side.

For each instance: simulated cycles per method, whether simulated = predicted, the hardware bound
(solver/hardware_bound.py) and its binding term, each method's cycles over it, the model gap of
cpsat (its objective against CP-SAT's proven bound, both in the task-level model; the ratios
are the programs' distance to the hardware), naive over cpsat, the solve time (to proof when the
search ended with one), and a comparison with a best-known file (a regression is a cpsat makespan above the recorded
best; `--record` writes improvements). Non-zero exit on a regression, a cycle mismatch or outputs
outside tolerance. Runs from an installed package too: the instance tiers and the best-known file
are found in the checkout beside the package, else under the current folder, or given.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from hwmodel.atomic import atomic_open

from .instance import instance_files, load_instance
from .pipeline import SolveOptions, run
from .report import report_dict

CHECKOUT = Path(__file__).resolve().parent.parent


def default_root() -> Path:
    """The folder holding `instances/` (and `bench/best_known.json`): the checkout, else `.`."""
    return CHECKOUT if (CHECKOUT / "instances").is_dir() else Path.cwd()


def _write(path: Path, text: str) -> None:
    with atomic_open(path, binary=False) as f:
        f.write(text)


def run_bench(
    paths: list[Path],
    methods: list[str],
    time_limit: float,
    best_path: Path,
    record: bool = False,
    json_path: str | None = None,
) -> int:
    best = json.loads(best_path.read_text()) if best_path.exists() else {}
    console = Console(width=None if sys.stdout.isatty() else 170)
    table = Table(title=f"pimsat bench ({time.strftime('%Y-%m-%d')})")
    for c in (
        "instance",
        "naive",
        "greedy",
        "cpsat",
        "sim == pred",
        "hw bound",
        "binds",
        "naive/hw",
        "greedy/hw",
        "cpsat/hw",
        "model gap",
        "naive/cpsat",
        "solve s",
        "best known",
    ):
        table.add_column(c, justify="left" if c == "instance" else "right")
    results = []
    failures = 0
    for path in paths:
        inst = load_instance(path)
        reps = {m: report_dict(run(inst, SolveOptions(method=m, time_limit=time_limit))) for m in methods}
        results.extend(reps.values())
        cp = reps.get("cpsat") or reps[methods[-1]]
        exact = all(r["objective_cycles"] == r["simulated_cycles"] for r in reps.values())
        hw_bound = cp["hardware_bound_cycles"]
        prev = best.get(inst.name)
        flag = (
            ""
            if prev is None
            else (
                "new best"
                if cp["objective_cycles"] < prev
                else ("=" if cp["objective_cycles"] == prev else f"REGRESSION (was {prev:,})")
            )
        )
        failures += int(not exact) + int(flag.startswith("REGRESSION"))
        failures += sum(r["outputs_match"] is False for r in reps.values())
        if record and (prev is None or cp["objective_cycles"] < prev):
            best[inst.name] = cp["objective_cycles"]
        table.add_row(
            inst.name,
            *[f"{reps[m]['simulated_cycles']:,}" if m in reps else "—" for m in ("naive", "greedy", "cpsat")],
            "yes" if exact else "NO",
            f"{hw_bound:,}",
            cp["binding_term"].replace("_", " "),
            *[
                f"{reps[m]['simulated_cycles'] / hw_bound:.3f}" if m in reps else "—"
                for m in ("naive", "greedy", "cpsat")
            ],
            "—" if cp["model_gap"] is None else f"{cp['model_gap'] * 100:.2f} %",
            f"{reps['naive']['simulated_cycles'] / cp['simulated_cycles']:.2f}×" if "naive" in reps else "—",
            f"{cp['solve_seconds']:.1f}",
            flag or "—",
        )
    console.print(table)
    if record:
        _write(best_path, json.dumps(dict(sorted(best.items())), indent=2) + "\n")
    if json_path:
        _write(Path(json_path), json.dumps(results, indent=2) + "\n")
    if failures:
        console.print(f"[bold red]{failures} failure(s): regression, mismatch or wrong outputs[/]")
    return 1 if failures else 0


def tier_paths(root: Path, tiers: list[str]) -> list[Path]:
    folder = root / "instances"
    if not folder.is_dir():
        raise FileNotFoundError(2, "no instances folder (run inside a pimsat checkout, or pass --root)", str(folder))
    return [p for t in tiers for p in instance_files(folder / t)]
