"""Run a sweep's points: `evaluate` (one point, pure and picklable: what Dask maps), the results
store (`results.jsonl`, appended as results arrive; `--resume` reads it back) and the driver that
submits points to a Dask client and writes every result the moment it arrives.

A point's methods share one lowering through a LoweringCache made for the point and dropped with
it. Across points, a worker process keeps one bounded TimingCache (`worker_timings`: the task
timings of the last few hardware timing fingerprints), so a point that changes only fields task
timing does not read (host dispatch, sync, vector and matrix rates) emits and times no PIM task
again; results are the same with it or without (`share_timings=False`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from .spec import Point, SweepError

RESULTS = "results.jsonl"


class Outcome(StrEnum):
    """What became of one method at one point."""

    DONE = "DONE"  # compiled, simulated and verified: `report` holds report.json's fields
    INFEASIBLE = "INFEASIBLE"  # no program fits this hardware; `message` says why in hardware terms
    ERROR = "ERROR"  # the point raised (a compiler bug, a worker lost, ...); `message` says what


def _failure(e: BaseException) -> tuple[Outcome, str]:
    from pimsat.pipeline import InfeasibleError, VerificationError
    from sim.errors import SimulationError

    if isinstance(e, InfeasibleError):
        return Outcome.INFEASIBLE, str(e)
    if isinstance(e, VerificationError):
        return Outcome.ERROR, f"compiler bug: {e}"
    if isinstance(e, SimulationError):
        return Outcome.ERROR, f"compiler bug: the simulator rejected the emitted program: {e}"
    return Outcome.ERROR, f"{type(e).__name__}: {e}"


def record(point: Point, method: str, outcome: Outcome, message: str | None, report=None, seconds=None) -> dict:
    return {
        "key": point.key(method),
        "index": point.index,
        "instance": point.instance["name"],
        "coords": dict(point.coords),
        "hardware": point.hardware,
        "total_lanes": point.total_lanes,
        "method": method,
        "outcome": str(outcome),
        "message": message,
        "seconds": seconds,
        "report": report,
    }


# Task timings kept by this process across the points it evaluates: the stores of the last
# WORKER_FINGERPRINTS hardware timing fingerprints (solver.task_timing.TimingCache).
WORKER_FINGERPRINTS = 4
_worker_timings = None


def worker_timings():
    """This process's TimingCache (made on first use, bounded to WORKER_FINGERPRINTS
    fingerprints): what a Dask worker's points share."""
    global _worker_timings
    if _worker_timings is None:
        from solver.task_timing import TimingCache

        _worker_timings = TimingCache(size=WORKER_FINGERPRINTS)
    return _worker_timings


def worker_timing_stats() -> dict[str, int]:
    """What this process's TimingCache holds and did: fingerprints, structure timings, hits and
    misses (for `Client.run`)."""
    cache = worker_timings()
    stores = cache.stores()
    return {
        "fingerprints": len(stores),
        "timings": sum(len(s.timings) for s in stores),
        "hits": sum(s.hits for s in stores),
        "misses": sum(s.misses for s in stores),
    }


def evaluate(point: Point, methods: tuple[str, ...] | None = None, share_timings: bool = True) -> dict[str, Any]:
    """One point: `pimsat.pipeline.run` (compile, simulate, verify) for each method, with the
    point's overrides, the methods sharing one lowering and, with `share_timings`, the task
    timings this process measured at earlier points (`worker_timings`). Never raises for a
    point's own failure: an infeasible or failing method is a record with its reason.
    {index, records}."""
    from pimsat.pipeline import LoweringCache, SolveOptions, run
    from pimsat.report import report_dict

    # this point's lowering, shared by its methods, gone after it
    cache = LoweringCache(size=1, timings=worker_timings() if share_timings else None)
    opts = point.options
    records = []
    try:
        inst = point.load_instance()
    except Exception as e:  # noqa: BLE001 - a point's failure is a row
        return {"index": point.index, "records": [record(point, m, *_failure(e)) for m in methods or opts.methods]}
    hw = None  # built by the first method, shared by the others
    for method in methods or opts.methods:
        t0 = time.perf_counter()
        solve = SolveOptions(
            method=method,
            time_limit=opts.time_limit,
            workers=opts.cp_workers,
            seed=opts.seed,
            groups=opts.groups,
            deterministic_time=opts.deterministic_time,
            functional=None if opts.functional else False,
            record=False,  # no command log: a timing-only simulation is streamed
        )
        try:
            if hw is None:
                hw = point.load_hardware()
            result = run(inst, solve, point.sets, point.preset, cache=cache, hardware=hw)
            report = report_dict(result)
            del result  # one program's streams in memory at a time
            report.pop("history", None)  # the incumbent over time: long, and not a result
            records.append(record(point, method, Outcome.DONE, None, report, round(time.perf_counter() - t0, 3)))
        except Exception as e:  # noqa: BLE001 - a point's failure is a row, the sweep goes on
            records.append(record(point, method, *_failure(e), seconds=round(time.perf_counter() - t0, 3)))
    return {"index": point.index, "records": records}


class ResultStore:
    """`DIR/results.jsonl`: one record per (point, method), appended and flushed as it arrives, so
    a killed sweep loses no finished point. Read back by key for `--resume` (a torn last line of
    a killed writer is cut off; ERROR records are left out, so that resume tries them again)."""

    def __init__(self, out: Path, resume: bool) -> None:
        self.path = Path(out) / RESULTS
        if self.path.exists() and not resume:
            raise SweepError(f"{self.path}: exists: --resume to complete that sweep, or another --out")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.done: dict[str, dict] = {}
        if resume and self.path.exists():
            text = self.path.read_text(encoding="utf-8")
            if text and not text.endswith("\n"):  # a killed writer's torn last line: cut it off
                text = text[: text.rfind("\n") + 1]
                with open(self.path, "r+", encoding="utf-8") as f:
                    f.truncate(len(text.encode("utf-8")))
            for line in text.splitlines():
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(rec, dict) and isinstance(rec.get("key"), str) and rec.get("outcome") != Outcome.ERROR:
                    self.done[rec["key"]] = rec  # an ERROR (a crash, a lost worker, the budget) is tried again

    def append(self, records: list[dict]) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            for rec in records:
                f.write(json.dumps(rec) + "\n")  # key order kept: the CSV columns follow it
            f.flush()
            os.fsync(f.fileno())
        for rec in records:
            self.done[rec["key"]] = rec


@dataclass
class SweepRun:
    """What a sweep did: the records of every point (in point order) and how many it evaluated."""

    records: list[dict]
    evaluated: int  # points run now (the rest came from results.jsonl)
    skipped: int  # points complete in results.jsonl already (--resume)
    seconds: float


class Progress:
    """What the driver reports; the CLI shows it with rich on a terminal (nothing otherwise)."""

    def start(self, total: int, skipped: int) -> None: ...
    def update(self, done: int, failed: int, running: int) -> None: ...
    def stop(self) -> None: ...


def _submit(client, point: Point, methods: tuple[str, ...], share_timings: bool = True):
    return client.submit(
        evaluate,
        point,
        methods,
        share_timings,
        key=f"pimsat-point-{point.index}-{point.keys[0][1][:12]}",
        pure=False,
    )


def _executing(dask_worker) -> list[str]:
    """The keys a worker is running now (called on each worker by Client.run)."""
    return [str(ts.key) for ts in dask_worker.state.executing]


def _overdue(client, pending: dict, started: dict[str, float], budget: float) -> list[tuple[object, str]]:
    """(future, worker) of the pending points that have run longer than `budget` seconds."""
    now = time.monotonic()
    running = {k: w for w, keys in client.run(_executing).items() for k in keys}
    for f in pending:
        if f.key in running:
            started.setdefault(f.key, now)
    return [(f, running[f.key]) for f in pending if f.key in running and now - started[f.key] > budget]


def run_points(
    points: list[Point],
    client,
    out: Path,
    *,
    resume: bool = False,
    budget: float | None = None,
    on_result: Callable[[dict[str, dict]], None] | None = None,
    progress: Progress | None = None,
    share_timings: bool = True,
) -> SweepRun:
    """Submit every point that results.jsonl does not already hold (all its methods; an ERROR is
    tried again) to the Dask `client`; append each point's records as they arrive and call
    `on_result(records by key)` (the CSV rewrite). A point whose task raises (a lost worker, a
    crash outside the pipeline) becomes ERROR records, and so does one that runs longer than
    `budget` seconds (its worker is restarted: Python cannot stop a running thread); the other
    points go on. `share_timings=False`: every point times its tasks afresh (same results, slower:
    evaluate)."""
    from dask.distributed import wait

    t0 = time.perf_counter()
    store = ResultStore(out, resume)
    progress = progress or Progress()
    todo = []
    for p in points:
        missing = tuple(m for m, k in p.keys if k not in store.done)
        if missing:
            todo.append((p, missing))
    skipped = len(points) - len(todo)
    progress.start(len(points), skipped)
    if on_result is not None and skipped:
        on_result(store.done)
    pending = {_submit(client, p, missing, share_timings): (p, missing) for p, missing in todo}
    slots = max(1, sum(client.nthreads().values()))
    started: dict[str, float] = {}
    done = failed = 0

    def finish(future, records: list[dict]) -> None:
        nonlocal done, failed
        del pending[future]
        future.release()
        store.append(records)
        done += 1
        failed += any(r["outcome"] != Outcome.DONE for r in records)
        progress.update(done, failed, min(slots, len(pending)))
        if on_result is not None:
            on_result(store.done)

    progress.update(done, failed, min(slots, len(pending)))
    while pending:
        try:
            finished = wait(list(pending), timeout=1.0 if budget else None, return_when="FIRST_COMPLETED").done
        except TimeoutError:  # none finished this second: look for points over their budget
            finished = set()
        for future in sorted(finished, key=lambda f: pending[f][0].index):
            point, missing = pending[future]
            try:
                records = future.result()["records"]
            except Exception as e:  # noqa: BLE001 - the task itself failed (e.g. KilledWorker): rows
                records = [record(point, m, *_failure(e)) for m in missing]
            finish(future, records)
        if budget and pending:
            for future, worker in _overdue(client, pending, started, budget):
                point, missing = pending[future]
                future.cancel()
                client.restart_workers([worker], raise_for_error=False)
                message = f"exceeded the point budget of {budget:g} s (its worker was restarted)"
                finish(future, [record(point, m, Outcome.ERROR, message) for m in missing])
    progress.stop()
    ordered = [store.done[k] for p in points for _, k in p.keys if k in store.done]
    return SweepRun(ordered, len(todo), skipped, time.perf_counter() - t0)
