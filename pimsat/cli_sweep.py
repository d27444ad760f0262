"""pimsat sweep: co-design sweeps over hardware and program fields on Dask (pimsat/sweep/)."""

from __future__ import annotations

import logging
import sys
from contextlib import ExitStack
from pathlib import Path

import click
from click.core import ParameterSource
from rich.console import Console
from rich.table import Table as RichTable

from hwmodel.atomic import output_lock
from solver.problem import Method

from .cli_base import UserError, console, guard, main
from .cli_base import cell as _cell
from .options import DEFAULT_WORK_BUDGET, DETERMINISTIC_TIME, SEED, TIME_LIMIT, WORKERS, nonempty
from .sweep.run import RESULTS, Outcome, Progress
from .sweep.spec import Axis, PointOptions, SweepError, build_points, read_sweep_file

METHODS = tuple(m.value for m in Method)
DASK_WORKERS = click.IntRange(1, 64)


class RichProgress(Progress):
    """Points done, failed and running, and the time left, on stderr (a terminal only)."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.bar = Progress(
            TextColumn("[bold]sweep[/bold]"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[state]}"),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self.task = None

    def start(self, total: int, skipped: int) -> None:
        self.bar.start()
        self.skipped = skipped
        self.task = self.bar.add_task("sweep", total=total, completed=skipped, state="")

    def update(self, done: int, failed: int, running: int) -> None:
        self.bar.update(
            self.task,
            completed=self.skipped + done,
            state=f"failed {failed}  running {running}" + (f"  resumed {self.skipped}" if self.skipped else ""),
        )

    def stop(self) -> None:
        self.bar.stop()


def _methods(text: str) -> tuple[str, ...]:
    chosen = tuple(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    bad = [m for m in chosen if m not in METHODS]
    if not chosen or bad:
        raise UserError(f"--methods: {', '.join(bad) or 'empty'}: not one of {', '.join(METHODS)}")
    return chosen


def _client(stack: ExitStack, workers: int, scheduler: str | None):
    from dask.distributed import Client, LocalCluster

    if scheduler:
        try:
            return stack.enter_context(Client(scheduler, timeout="20s"))
        except OSError as e:
            raise UserError(f"--scheduler {scheduler}: {e}") from None
    cluster = stack.enter_context(
        LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address="127.0.0.1:0",  # no fixed port (8787 may be taken); bokeh is not installed
            silence_logs=logging.ERROR,
        )
    )
    return stack.enter_context(Client(cluster))


@main.command()
@click.argument("instances", nargs=-1, type=click.Path())
@click.option("--axis", "axes", multiple=True, help="PATH=V1,V2,...: a field --set reaches, program.FIELD, or hw.")
@click.option("--file", "sweep_file", type=click.Path(), default=None, callback=nonempty, help="A sweep as YAML.")
@click.option("--methods", default="naive,greedy,cpsat", show_default=True)
@click.option("--zip", "zipped", is_flag=True, help="Advance the axes together instead of their product.")
@click.option(
    "--timing-only/--functional",
    default=True,
    show_default=True,
    help="Simulate timing only, or values too (functional where the program fits).",
)
@click.option("--time-limit", type=TIME_LIMIT, default=60.0, show_default=True, help="CP-SAT wall-clock guard (s).")
@click.option(
    "--deterministic-time",
    type=DETERMINISTIC_TIME,
    default=DEFAULT_WORK_BUDGET,
    show_default=True,
    help="CP-SAT work budget (deterministic s), as for solve.",
)
@click.option(
    "--cp-workers", type=WORKERS, default=2, show_default=True, help="CP-SAT workers per point (solve's --workers)."
)
@click.option("--seed", type=SEED, default=0, show_default=True)
@click.option("--groups", type=click.IntRange(min=1), default=4, show_default=True)
@click.option("--hw", "preset", default=None, help="Hardware preset or YAML file (default: each instance's).")
@click.option("--set", "sets", multiple=True, help="Hardware override KEY=VALUE at every point.")
@click.option("--workers", type=DASK_WORKERS, default=1, show_default=True, help="Dask workers of a LocalCluster.")
@click.option("--scheduler", default=None, callback=nonempty, help="Address of an existing Dask scheduler.")
@click.option(
    "--out", type=click.Path(), required=True, callback=nonempty, help="results.jsonl, .csv, plots/, report.html."
)
@click.option("--resume", is_flag=True, help="Skip the points results.jsonl already holds (ERROR rows run again).")
@click.option(
    "--point-budget",
    type=TIME_LIMIT,
    default=None,
    help="Wall-clock seconds one point may take; past it the point is an ERROR row and its worker is restarted.",
)
@click.option(
    "--no-timing-cache",
    is_flag=True,
    help="Time every point's PIM tasks afresh (same results; by default a worker reuses the task "
    "timings of earlier points whose hardware differs only where timing does not read).",
)
@click.pass_context
@guard
def sweep(
    ctx,
    instances,
    axes,
    sweep_file,
    methods,
    zipped,
    timing_only,
    time_limit,
    deterministic_time,
    cp_workers,
    seed,
    groups,
    preset,
    sets,
    workers,
    scheduler,
    out,
    resume,
    point_budget,
    no_timing_cache,
) -> None:
    """Compile, simulate and verify INSTANCES at every point of the axes, on Dask; write results
    as they arrive, then the sensitivity table, plots and report.html."""
    from .sweep.outputs import write_results
    from .sweep.run import run_points

    given = lambda name: ctx.get_parameter_source(name) not in (ParameterSource.DEFAULT, None)  # noqa: E731
    paths: list[Path] = []
    axis_list: list[Axis] = []
    try:
        if sweep_file:
            spec, file_axes, file_instances = read_sweep_file(sweep_file)
            paths += file_instances
            axis_list += file_axes
            methods = methods if given("methods") or not spec.methods else ",".join(str(m) for m in spec.methods)
            zipped = zipped or spec.zip
            timing_only = timing_only if given("timing_only") else spec.timing_only
            time_limit = time_limit if given("time_limit") or spec.time_limit is None else spec.time_limit
            if not given("deterministic_time") and spec.deterministic_time is not None:
                deterministic_time = spec.deterministic_time
            preset = preset or spec.hw
            sets = tuple(spec.set) + tuple(sets)
        paths += [Path(p) for p in instances]
        axis_list += [Axis.parse(a) for a in axes]
        options = PointOptions(
            methods=_methods(methods),
            functional=not timing_only,
            time_limit=time_limit,
            deterministic_time=deterministic_time,
            cp_workers=cp_workers,
            seed=seed,
            groups=groups,
        )
        points = build_points(paths, axis_list, options, zipped=zipped, preset=preset, sets=sets)
    except SweepError as e:
        raise UserError(str(e)) from None
    out = Path(out)
    ctx.with_resource(output_lock(out))  # one sweep writes a folder at a time
    if (out / RESULTS).exists() and not resume:
        raise UserError(f"{out / RESULTS}: exists: --resume to complete that sweep, or another --out")
    console.print(
        f"[dim]sweep: {len(points)} points × {len(options.methods)} methods; "
        + (f"scheduler {scheduler}" if scheduler else f"{workers} Dask worker(s)")
        + "[/dim]"
    )
    with ExitStack() as stack:
        try:
            from .sweep.report import write_csv

            on_result = lambda done: write_csv(out, points, done)  # noqa: E731
            client = _client(stack, workers, scheduler)
            progress = RichProgress() if sys.stderr.isatty() else None
            result = run_points(
                points,
                client,
                out,
                resume=resume,
                budget=point_budget,
                on_result=on_result,
                progress=progress,
                share_timings=not no_timing_cache,
            )
        except SweepError as e:
            raise UserError(str(e)) from None
    done = {r["key"]: r for r in result.records}
    title = f"pimsat sweep — {', '.join(dict.fromkeys(p.instance['name'] for p in points))}"
    written = write_results(out, points, done, zipped=zipped, title=title)
    _print_sensitivity(written.sensitivity, zipped)
    failed = sum(r["outcome"] != Outcome.DONE for r in result.records)
    console.print(
        f"evaluated {result.evaluated} points, {result.skipped} already in {out}/results.jsonl; "
        f"{failed} results infeasible or failed; {result.seconds:.1f} s"
    )
    console.print(f"wrote {out}/results.jsonl, results.csv, report.html, plots/ ({len(written.figures)} figures)")


def _print_sensitivity(sens, zipped: bool) -> None:
    if not sens.rows:
        return
    basis = "all axes together (--zip)" if zipped else "one axis at a time, the others at their first value"
    t = RichTable(title=f"sensitivity: cycles per step of an axis ({basis})")
    for c in sens.columns:
        t.add_column(
            c.replace("_", " "), justify="left" if c in ("instance", "axis", "step", "method", "binding") else "right"
        )
    for r in sens.rows:
        t.add_row(*[_cell(r[c], c) for c in sens.columns])
    console.print(t)
