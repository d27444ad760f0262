"""pimsat solve / compare / simulate / demo / bench."""

from __future__ import annotations

import csv
import io
import json
import time
from contextlib import nullcontext
from pathlib import Path

import click
from rich.table import Table

from hwmodel.atomic import output_lock
from solver.alternatives import Alternative
from solver.problem import Method

from . import signals
from .cli_base import DEFAULT_INSTANCE, UserError, console, guard, main
from .cli_base import cell as _cell
from .instance import instance_files, load_instance
from .options import (
    DEFAULT_WORK_BUDGET,
    DETERMINISTIC_TIME,
    LOWER_JOBS_HELP,
    SEED,
    SIM_JOBS,
    SIM_JOBS_HELP,
    TIME_LIMIT,
    WORKERS,
    nonempty,
)
from .sizes import TRACE_INSTRUCTIONS

METHODS = tuple(m.value for m in Method)
TIERS = ("fpga", "llm", "micro", "small")  # instances/<tier>/ (instances/generate.py)


class LiveProgress:
    """One live line while a method runs (rich): CP-SAT's time, incumbent, proven bound and gap;
    then how much of the program the simulator has read."""

    def __init__(self, label: str = "cpsat") -> None:
        from rich.live import Live

        self.label = label
        self.live = Live(
            f"[bold]{label}[/bold] lowering, solving, decoding…", console=console, refresh_per_second=8, transient=True
        )
        self._sim_start: tuple[float, int] | None = None  # (time, instructions) of the first report

    def _text(self, t: float, incumbent: int | None, bound: int | None) -> str:
        if incumbent is None:
            return f"[bold]{self.label}[/bold] {t:6.2f} s  searching…"
        gap = "" if not bound or not incumbent else f"  gap {(incumbent - bound) / incumbent * 100:5.2f} %"
        return (
            f"[bold]{self.label}[/bold] {t:6.2f} s  incumbent {incumbent:,}  bound "
            f"{'—' if bound is None else f'{bound:,}'}{gap}"
        )

    def update(self, t: float, incumbent: int | None, bound: int | None) -> None:
        self.live.update(self._text(t, incumbent, bound))

    def simulating(self, done: int, total: int) -> None:
        now = time.monotonic()
        if self._sim_start is None:
            self._sim_start = (now, done)
        t0, d0 = self._sim_start
        rate = f", {(done - d0) / (now - t0) / 1e6:.1f} M/s" if now > t0 and done > d0 else ""
        self.live.update(
            f"[bold]{self.label}[/bold] simulating  {done / 1e6:,.1f} M of {total / 1e6:,.1f} M "
            f"instructions ({done / max(total, 1):.0%}{rate})"
        )

    def __enter__(self) -> LiveProgress:
        self.live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.live.__exit__(*exc)


def _live(label: str, wanted: bool = True):
    """A LiveProgress on a terminal (None inside the `with` otherwise)."""
    return LiveProgress(label) if wanted and console.is_terminal else nullcontext()


def _solve_options(
    method,
    time_limit,
    workers,
    seed,
    groups,
    timing_only,
    deterministic_time=None,
    record=False,
    live: LiveProgress | None = None,
    sim_jobs: int = 1,
    lower_jobs: int = 1,
    without: frozenset[str] = frozenset(),
):
    """record: keep the simulator's command log (only trace.json needs it; without it a
    timing-only simulation is streamed and its memory does not grow with the program).
    live: where CP-SAT and the simulator report progress."""
    from .pipeline import SolveOptions

    return SolveOptions(
        method=method,
        time_limit=time_limit,
        workers=workers,
        seed=seed,
        groups=groups,
        functional=False if timing_only else None,
        deterministic_time=deterministic_time,
        record=record,
        progress=live.update if live else None,
        sim_progress=live.simulating if live else None,
        sim_jobs=sim_jobs,
        lower_jobs=lower_jobs,
        without=without,
    )


def _alternatives(ctx, param, value: str) -> frozenset[str]:
    """--without: known Alternative names, else one line (exit 2)."""
    names = [v.strip() for v in value.split(",") if v.strip()]
    known = {a.value for a in Alternative}
    bad = [n for n in names if n not in known]
    if bad:
        raise UserError(f"--without: unknown alternative(s) {', '.join(bad)} (known: {', '.join(sorted(known))})")
    return frozenset(names)


def _solver_flags(fn):
    fn = click.option("--hw", "preset", default=None, help="Hardware preset or YAML file (default: the instance's).")(
        fn
    )
    fn = click.option("--set", "sets", multiple=True, help="Hardware override KEY=VALUE.")(fn)
    fn = click.option(
        "--time-limit",
        type=TIME_LIMIT,
        default=60.0,
        show_default=True,
        help="CP-SAT wall-clock guard (s); a search it stops is reported as not reproducible.",
    )(fn)
    fn = click.option(
        "--workers", type=WORKERS, default=2, show_default=True, help="CP-SAT workers (interleaved deterministically)."
    )(fn)
    fn = click.option("--seed", type=SEED, default=0, show_default=True, help="CP-SAT random seed (int32).")(fn)
    fn = click.option(
        "--groups",
        type=click.IntRange(min=1),
        default=4,
        show_default=True,
        help="Channel groups (identical channels scheduled in lockstep).",
    )(fn)
    fn = click.option("--timing-only", is_flag=True, help="Simulate timing only (no values).")(fn)
    fn = click.option("--sim-jobs", type=SIM_JOBS, default=0, show_default=True, help=SIM_JOBS_HELP)(fn)
    fn = click.option("--lower-jobs", type=SIM_JOBS, default=0, show_default=True, help=LOWER_JOBS_HELP)(fn)
    fn = click.option(
        "--without",
        "without",
        default="",
        callback=_alternatives,
        help="Alternatives not to offer the solvers, comma-separated ("
        + ", ".join(a.value for a in Alternative)
        + "): the same compile without them, to measure what they buy.",
    )(fn)
    fn = click.option(
        "--deterministic-time",
        type=DETERMINISTIC_TIME,
        default=DEFAULT_WORK_BUDGET,
        show_default=True,
        help="CP-SAT work budget (deterministic s): a search it ends gives the same bytes on every "
        "run whatever the machine's load (the wall-clock --time-limit stays a guard).",
    )(fn)
    return fn


@main.command()
@click.argument("instance", type=click.Path(), default=str(DEFAULT_INSTANCE))
@click.option("--method", type=click.Choice(METHODS), default="cpsat", show_default=True)
@click.option(
    "--out",
    "out",
    type=click.Path(),
    default=None,
    callback=nonempty,
    help=f"Write report.json, streams/, schedule.json, trace.json (for programs of at most "
    f"{TRACE_INSTRUCTIONS:,} channel instructions: the command log it needs grows with the program), "
    "outputs/ (functional runs).",
)
@click.option("--json", "as_json", is_flag=True, help="Print report.json instead of the summary.")
@click.option(
    "--inputs",
    "step_inputs",
    type=click.Path(),
    default=None,
    callback=nonempty,
    help="A .pt2 instance's step: an .npz of the exported graph's user inputs (program.inputs); "
    "with PyTorch's outputs in it (out_0, ...) the simulated step is checked against them.",
)
@click.option(
    "--command-level",
    "command_level",
    is_flag=True,
    help="Also solve the command-level CP-SAT of the compiled program (solver/cmdlevel; small "
    "programs: every command is a variable), re-emit it stamped and simulate it; the report gains "
    "`command_level`. The program written and `proof_scope` stay the task level's.",
)
@click.option(
    "--steady-state",
    "steady_state",
    is_flag=True,
    help="Also solve the steady state of each task loop of the critical channel as a modulo "
    "schedule (solver/cmdlevel/modulo.py; any program size: one loop period is the model) and "
    "prove its least initiation interval; the report gains `steady_state`.",
)
@_solver_flags
@guard
def solve(
    instance,
    method,
    out,
    as_json,
    step_inputs,
    command_level,
    steady_state,
    preset,
    sets,
    time_limit,
    workers,
    seed,
    groups,
    timing_only,
    sim_jobs,
    lower_jobs,
    without,
    deterministic_time,
) -> None:
    """Compile INSTANCE: solve, decode to instruction streams, simulate, verify, report."""
    from . import pipeline
    from .pipeline import run
    from .report import print_summary, report_dict

    if out:  # a second writer of this folder is refused now, not after the solve
        click.get_current_context().with_resource(output_lock(out))
    inst = load_instance(instance)
    if step_inputs is not None:
        if inst.program.kind != "pt2":
            raise UserError(f"--inputs: {instance} is a {inst.program.kind} instance; --inputs is for a .pt2 program")
        if timing_only:
            raise UserError("--inputs: a timing-only run reads no values")
        if not Path(step_inputs).is_file():
            raise UserError(f"--inputs: {step_inputs}: no such file")
        inst.program.inputs = str(Path(step_inputs).resolve())
    with _live(method, not as_json) as live:
        r = run(
            inst,
            _solve_options(
                method,
                time_limit,
                workers,
                seed,
                groups,
                timing_only,
                deterministic_time,
                # (the log: trace.json, the report's mac_stream, the command-level models)
                record=True if command_level or steady_state else None,
                live=live,
                sim_jobs=sim_jobs,
                lower_jobs=lower_jobs,
                without=without,
            ),
            sets,
            preset,
        )
    signals.ensure()
    rep = report_dict(r)
    if command_level:
        from .command_level import command_level as solve_commands

        rep["command_level"] = solve_commands(r, time_limit=time_limit, workers=workers).as_dict()
    if steady_state:
        from .steady_state import steady_states

        rep["steady_state"] = steady_states(r, time_limit=time_limit, workers=workers)
    pytorch = None
    if inst.program.kind == "pt2":
        from .pt2_run import against_pytorch

        pytorch = against_pytorch(inst, r.program, r.sim, r.hardware.pim.dtype)
        rep["pytorch"] = None if pytorch is None else pytorch.as_dict()
    if out:
        from .output import write_outputs

        write_outputs(r, rep, out)
    if as_json:
        click.echo(json.dumps(rep, indent=2))
    else:
        print_summary(rep)
        if command_level:
            c = rep["command_level"]
            console.print(
                f"command level: {c['status']} {c['objective_cycles']:,} cycles (bound {c['bound_cycles']:,}, "
                f"emitted {c['emitted_cycles']:,}), simulated {c['simulated_cycles']:,}, {c['seconds']:.1f} s; "
                f"scope: {c['scope']}",
                soft_wrap=True,
            )
        if steady_state:
            from .steady_state import describe

            block = rep["steady_state"]
            lines = describe(block) or ["no loop of three or more iterations"]
            console.print(f"steady state (channel {block['channel']}):", soft_wrap=True)
            for line in lines:
                console.print(f"  {line}", soft_wrap=True, markup=False)  # (task names hold [all])
        if pytorch is not None:
            verdict = "within tolerance" if pytorch.outputs_match else "OUTSIDE tolerance"
            token = "equal" if pytorch.next_token_equal else "DIFFERENT"
            console.print(
                f"against PyTorch ({pytorch.source}): outputs {verdict} (max |err| {pytorch.max_abs_error:.3g}), "
                f"next token {token}",
                soft_wrap=True,  # one line whatever the terminal's width: scripts grep it
            )
        if out:
            wrote = ["report.json", "streams/", "schedule.json"]
            if getattr(r.sim, "log", None) is not None:
                wrote.append("trace.json")
            if getattr(r.sim, "outputs", None):
                wrote.append("outputs/")
            console.print(f"wrote {out}/" + ", ".join(wrote))
            if getattr(r.sim, "log", None) is None and r.compiled is not None:
                n = sum(len(s) for s in r.compiled.streams.channels)
                console.print(
                    f"no trace.json: {n:,} channel instructions, over the {pipeline.TRACE_INSTRUCTIONS:,} "
                    "a command log is kept for"
                )
    if rep["outputs_match"] is False:
        raise UserError(f"{inst.name}: simulated outputs differ from the reference (max |err| {rep['max_abs_error']})")
    if pytorch is not None and not (pytorch.outputs_match and pytorch.next_token_equal):
        token = "equal" if pytorch.next_token_equal else "different"
        raise UserError(
            f"{inst.name}: simulated step differs from PyTorch's outputs in {pytorch.source} "
            f"(max |err| {pytorch.max_abs_error:.3g}, next token {token})"
        )


@main.command()
@click.argument("instances", nargs=-1, required=True, type=click.Path())
@click.option("--methods", default="naive,greedy,cpsat", show_default=True)
@click.option(
    "--csv", "csv_path", type=click.Path(), default=None, callback=nonempty, help="Also write the table as CSV."
)
@click.option(
    "--json", "json_path", type=click.Path(), default=None, callback=nonempty, help="Also write the reports as JSON."
)
@_solver_flags
@guard
def compare(
    instances,
    methods,
    csv_path,
    json_path,
    preset,
    sets,
    time_limit,
    workers,
    seed,
    groups,
    timing_only,
    sim_jobs,
    lower_jobs,
    without,
    deterministic_time,
) -> None:
    """Compare methods on instances: one table (and CSV/JSON)."""
    from .pipeline import run
    from .report import report_dict

    chosen = [m.strip() for m in methods.split(",") if m.strip()]
    if not chosen:
        raise UserError(f"--methods: no method given (known: {', '.join(METHODS)})")
    bad = [m for m in chosen if m not in METHODS]
    if bad:
        raise UserError(f"--methods: unknown method(s) {', '.join(bad)} (known: {', '.join(METHODS)})")
    paths = [p for a in instances for p in instance_files(a)]
    rows = []
    for path in paths:
        inst = load_instance(path)
        for m in chosen:
            with _live(f"{inst.name} {m}") as live:
                r = run(
                    inst,
                    _solve_options(
                        m,
                        time_limit,
                        workers,
                        seed,
                        groups,
                        timing_only,
                        deterministic_time,
                        live=live,
                        sim_jobs=sim_jobs,
                        lower_jobs=lower_jobs,
                        without=without,
                    ),
                    sets,
                    preset,
                )
            signals.ensure()
            rows.append(report_dict(r))
            del r  # one program's streams in memory at a time
            rep = rows[-1]
            console.print(
                f"[dim]{rep['instance']} {m}: {rep['simulated_cycles']:,} cycles, {rep['status']}, "
                f"hardware bound {rep['hardware_bound_cycles']:,} ({rep['binding_term']})[/dim]"
            )
            if json_path:  # partial results survive an interrupted comparison
                _atomic_write(Path(json_path), json.dumps(rows, indent=2) + "\n")
    cols = (
        "instance",
        "method",
        "status",
        "objective_cycles",
        "model_bound_cycles",
        "model_gap",
        "gap",
        "lower_bound_cycles",
        "hardware_gap",
        "binding_term",
        "simulated_cycles",
        "outputs_match",
        "utilization",
        "solve_seconds",
    )
    t = Table(title="pimsat compare")
    for c in cols:
        t.add_column(c.replace("_cycles", "").replace("_", " "), justify="left" if c in cols[:3] else "right")
    for rep in rows:
        t.add_row(*[_cell(rep[c], c) for c in cols])
    console.print(t)
    if csv_path:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
        _atomic_write(Path(csv_path), buf.getvalue())
    if json_path:
        _atomic_write(Path(json_path), json.dumps(rows, indent=2) + "\n")


def _atomic_write(path: Path, text: str) -> None:
    from hwmodel.atomic import atomic_open

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path, binary=False) as f:
        f.write(text)


@main.command()
@click.option("--time-limit", type=TIME_LIMIT, default=20.0, show_default=True)
@guard
def demo(time_limit) -> None:
    """Solve the default instance (GEMV 4096x4096 on 64 HBM2-PIM channels), simulate, verify, report."""
    from .pipeline import SolveOptions, run
    from .report import print_summary, report_dict

    inst = load_instance(DEFAULT_INSTANCE)
    console.print(f"[bold]pimsat demo[/bold]: {inst.description}")
    rows = []
    for method in METHODS:
        r = run(inst, SolveOptions(method=method, time_limit=time_limit))
        signals.ensure()
        rows.append(report_dict(r))
    print_summary(rows[-1])
    t = Table(title="methods")
    for c in ("method", "predicted", "simulated", "vs bandwidth bound 8,192", "outputs"):
        t.add_column(c, justify="right")
    for rep in rows:
        t.add_row(
            rep["method"],
            f"{rep['objective_cycles']:,}",
            f"{rep['simulated_cycles']:,}",
            f"{rep['simulated_cycles'] / rep['bandwidth_bound_cycles']:.3f}×",
            ("match, bit-exact" if rep.get("bit_exact") else "match")
            if rep["outputs_match"]
            else str(rep["outputs_match"]),
        )
    console.print(t)
    console.print(
        "For comparison: a published simulator of this chip (SAITPublic/PIMSimulator) needs 13,166 "
        "cycles for the same GEMV, 36,082 without PIM."
    )


@main.command()
@click.option("--tier", multiple=True, type=click.Choice(TIERS), default=("fpga", "micro"), show_default=True)
@click.option("--instance", "extra", multiple=True, type=click.Path(), help="Also this instance file.")
@click.option("--methods", default="naive,greedy,cpsat", show_default=True)
@click.option("--time-limit", type=TIME_LIMIT, default=30.0, show_default=True)
@click.option("--json", "json_path", type=click.Path(), default=None, callback=nonempty)
@click.option(
    "--root",
    type=click.Path(file_okay=False),
    default=None,
    help="Folder holding instances/ and bench/best_known.json (default: the checkout, else .).",
)
@click.option("--record", is_flag=True, help="write better cpsat makespans into bench/best_known.json")
@guard
def bench(tier, extra, methods, time_limit, json_path, root, record) -> None:
    """Run the benchmark tiers with all methods; print figures and ratios (non-zero exit on a
    regression against bench/best_known.json)."""
    from .benchmark import default_root, run_bench, tier_paths

    base = Path(root) if root else default_root()
    paths = tier_paths(base, list(tier)) + [Path(p) for p in extra]
    wanted = [m.strip() for m in methods.split(",") if m.strip()]
    bad = [m for m in wanted if m not in METHODS]
    if bad or not wanted:
        raise UserError(f"--methods: {','.join(bad) or 'empty'}: not one of {', '.join(METHODS)}")
    code = run_bench(paths, wanted, time_limit, base / "bench" / "best_known.json", record, json_path)
    if code:
        raise SystemExit(code)
