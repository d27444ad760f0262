"""pimsat sweep: points on a Dask LocalCluster equal single pipeline runs; resume computes only
what is missing and ends with the same CSV, byte for byte; a failing point is a row; a bad axis is
one line and exit 2 before any work; the worker count changes nothing."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from pimsat.cli import main
from pimsat.instance import load_instance
from pimsat.pipeline import SolveOptions, run
from pimsat.sweep.outputs import write_results
from pimsat.sweep.plots import figures, pareto_front
from pimsat.sweep.report import CSV_NAME, axis_values, point_table, sensitivity
from pimsat.sweep.run import RESULTS, Outcome, evaluate, run_points, worker_timing_stats
from pimsat.sweep.spec import Axis, PointOptions, SweepError, build_points

ROOT = Path(__file__).resolve().parents[2]
GEMV = ROOT / "instances" / "fpga" / "gemv-64x128-fpga.yaml"
METHODS = ("greedy", "cpsat")
AXES = ["pim.lanes=8,16", "organization.rows=64,1"]  # rows=1: the weights do not fit (INFEASIBLE)
OPTIONS = PointOptions(methods=METHODS, time_limit=20.0, deterministic_time=2.5)


@pytest.fixture(scope="module")
def client():
    from dask.distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0") as cluster:
        with Client(cluster) as c:
            yield c


@pytest.fixture(scope="module")
def swept(client, tmp_path_factory):
    """The 4-point sweep on 2 workers, and where it wrote."""
    out = tmp_path_factory.mktemp("sweep") / "out"
    points = build_points([GEMV], [Axis.parse(a) for a in AXES], OPTIONS)
    result = run_points(points, client, out)
    write_results(out, points, {r["key"]: r for r in result.records}, zipped=False, title="test")
    return points, result, out


def test_points_equal_single_pipeline_runs(swept):
    points, result, _ = swept
    assert result.evaluated == 4 and result.skipped == 0
    assert [(r["index"], r["method"]) for r in result.records] == [(i, m) for i in range(4) for m in METHODS]
    inst = load_instance(GEMV)
    for rec in result.records:
        coords = rec["coords"]
        sets = [f"{k}={v}" for k, v in coords.items()]
        if coords["organization.rows"] == "1":
            assert rec["outcome"] == Outcome.INFEASIBLE
            assert "need" in rec["message"] and "1 rows" in rec["message"]  # the reason, in bytes and rows
            assert rec["report"] is None
            continue
        assert rec["outcome"] == Outcome.DONE, rec["message"]
        single = run(
            inst,
            SolveOptions(method=rec["method"], time_limit=20.0, deterministic_time=2.5, functional=False, record=False),
            sets,
        )
        rep = rec["report"]
        assert rep["simulated_cycles"] == int(single.sim.cycles) == single.compiled.predicted_cycles
        assert rep["status"] == str(single.solution.status)
        assert rep["hardware_bound_cycles"] == single.bounds.hardware.cycles
        assert rep["bound_terms"] == single.bounds.hardware.as_dict()
        assert rep["binding_term"] == str(single.bounds.hardware.binding)
    # 16 lanes per unit are faster than 8 at 64 rows
    cyc = {
        (r["coords"]["pim.lanes"], r["method"]): r["report"]["simulated_cycles"] for r in result.records if r["report"]
    }
    assert cyc[("16", "cpsat")] < cyc[("8", "cpsat")]


def test_csv_sensitivity_plots_and_html(swept):
    points, result, out = swept
    rows = list(csv.DictReader(io.StringIO((out / CSV_NAME).read_text())))
    assert [r["point"] for r in rows] == ["0", "1", "2", "3"]
    assert rows[1]["greedy_status"] == "INFEASIBLE" and "need" in rows[1]["message"]
    done = rows[0]
    for col in ("hardware_bound_cycles", "bound_streaming", "bound_row_cycle", "bound_host", "bound_critical_path"):
        assert int(done[col]) > 0
    assert done["binding_term"] and int(done["cpsat_cycles"]) >= int(done["hardware_bound_cycles"])
    table = point_table(points, {r["key"]: r for r in result.records})
    sens = sensitivity(table, axis_values(points), list(METHODS), zipped=False)
    lanes = [s for s in sens.rows if s["axis"] == "pim.lanes"]
    assert [s["step"] for s in lanes] == ["8 → 16"] * 2  # organization.rows at its first value, 64
    by_lanes = {(r["pim.lanes"], r["organization.rows"]): r for r in table.rows}
    for s in lanes:
        before, after = (by_lanes[(v, "64")][f"{s['method']}_cycles"] for v in ("8", "16"))
        assert (s["cycles_before"], s["cycles_after"], s["delta_cycles"]) == (before, after, after - before)
    rows_axis = [s for s in sens.rows if s["axis"] == "organization.rows"]
    assert all(s["delta_cycles"] is None and s["binding"].endswith("→ None") for s in rows_axis)
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == len(list((out / "plots").glob("*.png"))) >= 4
    assert "Pareto" in html and "total PIM lanes" in html
    # plots are deterministic bytes
    again = figures(table, axis_values(points), list(METHODS), zipped=False)
    assert [png for _, _, png in again] == [(out / "plots" / f"{stem}.png").read_bytes() for stem, _, _ in again]


def test_resume_computes_only_missing_points_and_ends_with_the_same_csv(swept, client, tmp_path):
    points, _, out = swept
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    lines = (copy / RESULTS).read_text().splitlines()
    # drop point 1 entirely and point 3's cpsat, and tear the last line as a killed writer would
    kept = [ln for ln in lines if not (json.loads(ln)["index"] == 1 or json.loads(ln)["index"] == 3 and "cpsat" in ln)]
    assert len(kept) == len(lines) - 3
    (copy / RESULTS).write_text("\n".join(kept) + "\n" + lines[-1][:20])
    (copy / CSV_NAME).unlink()
    with pytest.raises(SweepError, match="--resume"):
        run_points(points, client, copy)
    resumed = run_points(points, client, copy, resume=True)
    assert (resumed.evaluated, resumed.skipped) == (2, 2)
    assert len((copy / RESULTS).read_text().splitlines()) == len(kept) + 3  # 3 method runs, the torn line cut
    written = write_results(copy, points, {r["key"]: r for r in resumed.records}, zipped=False, title="test")
    assert (copy / CSV_NAME).read_bytes() == (out / CSV_NAME).read_bytes()
    assert len(written.table.rows) == 4
    again = run_points(points, client, copy, resume=True)
    assert (again.evaluated, again.skipped) == (0, 4)


def test_cli_with_one_worker_writes_the_same_csv(swept, tmp_path):
    _, _, out = swept
    args = ["sweep", str(GEMV), *(x for a in AXES for x in ("--axis", a)), "--methods", ",".join(METHODS)]
    args += ["--time-limit", "20", "--workers", "1", "--out", str(tmp_path / "one")]
    r = CliRunner().invoke(main, args, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "evaluated 4 points" in r.output and "sensitivity" in r.output
    assert (tmp_path / "one" / CSV_NAME).read_bytes() == (out / CSV_NAME).read_bytes()
    r = CliRunner().invoke(main, args, catch_exceptions=False)  # the folder holds a sweep: refused
    assert r.exit_code == 2 and "--resume" in r.stderr


@pytest.mark.parametrize(
    "axis, names",
    [
        ("pim.lanez=8,16", "--axis pim.lanez=8: pim.lanez"),
        ("pim.lanes=8,many", "--axis pim.lanes=many: pim.lanes"),
        ("organization.channels=2,0", "--axis organization.channels=0: organization.channels"),
        ("program.batch=1,0", "--axis program.batch=0: program.batch"),
        ("program.nope=1", "--axis program.nope=1: program.nope"),
        ("hw=fpga-proto,nosuch", "--axis hw=nosuch: unknown hardware preset"),
        ("pim.lanes", "--axis pim.lanes: expected PATH=V1,V2"),
    ],
)
def test_bad_axis_is_one_line_and_exit_2_before_any_work(axis, names, tmp_path):
    out = tmp_path / "never"
    r = CliRunner().invoke(main, ["sweep", str(GEMV), "--axis", axis, "--out", str(out)], catch_exceptions=False)
    assert r.exit_code == 2
    assert r.stderr.startswith(f"pimsat: error: {names}") and r.stderr.count("\n") == 1, r.stderr
    assert not out.exists()


def test_zip_needs_axes_of_one_length_and_sweep_file(tmp_path):
    with pytest.raises(SweepError, match="--zip"):
        build_points([GEMV], [Axis.parse("pim.lanes=8,16"), Axis.parse("organization.rows=32")], OPTIONS, zipped=True)
    zipped = build_points([GEMV], [Axis.parse("pim.lanes=8,16"), Axis.parse("program.batch=1,2")], OPTIONS, zipped=True)
    assert [p.coords for p in zipped] == [
        (("pim.lanes", "8"), ("program.batch", "1")),
        (("pim.lanes", "16"), ("program.batch", "2")),
    ]
    assert zipped[1].instance["program"]["batch"] == 2 and zipped[1].total_lanes == 2 * 2 * 16
    assert len({p.key("cpsat") for p in zipped}) == 2
    f = tmp_path / "sweep.yaml"
    f.write_text(f"instances: [{GEMV}]\naxes: {{pim.lanes: [8, 16], program.batch: [1, 2]}}\nzip: true\n")
    r = CliRunner().invoke(main, ["sweep", "--file", str(f), "--axis", "pim.lanes=4", "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "--axis pim.lanes: given twice" in r.stderr
    f.write_text("instances: []\naxes: {pim.lanes: 8}\n")
    r = CliRunner().invoke(main, ["sweep", "--file", str(f), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "axes.pim.lanes" in r.stderr


def test_sweep_file_zip_on_an_existing_scheduler(client, tmp_path):
    f = tmp_path / "sweep.yaml"
    f.write_text(
        f"instances: [{GEMV}]\naxes: {{program.batch: [1, 2], pim.lanes: [16, 8]}}\nzip: true\n"
        "methods: [greedy]\ntime_limit: 20\n"
    )
    out = tmp_path / "o"
    args = ["sweep", "--file", str(f), "--scheduler", client.scheduler.address, "--out", str(out)]
    r = CliRunner().invoke(main, args, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO((out / CSV_NAME).read_text())))
    assert [(x["program.batch"], x["pim.lanes"], x["greedy_status"]) for x in rows] == [
        ("1", "16", "HEURISTIC"),
        ("2", "8", "HEURISTIC"),
    ]
    assert "program.batch + pim.lanes" in r.output  # the zipped axes step together in the sensitivity table


def test_a_point_that_raises_is_an_error_row():
    (point,) = build_points([GEMV], [], OPTIONS)
    # past the up-front check (built from its overrides in the worker, not from the resolved JSON)
    broken = type(point)(**{**point.__dict__, "sets": ("pim.lanes=oops",), "resolved": ""})
    recs = evaluate(broken)["records"]
    assert [r["outcome"] for r in recs] == [Outcome.ERROR] * 2
    assert "pim.lanes" in recs[0]["message"] and recs[0]["key"] == point.key("greedy")


def test_a_point_carries_its_hardware_as_built():
    """The worker validates the hardware the sweep built (no preset file read): the same device
    as building it again from the instance and the point's overrides."""
    for point in build_points([GEMV], [Axis.parse(a) for a in AXES[:1] + HOST_AXES], OPTIONS):
        built = point.load_instance().build_hardware(list(point.sets), point.preset)
        assert point.load_hardware() == built and point.load_hardware().model_dump_json() == point.resolved


def test_pareto_front():
    assert pareto_front([(64, 900), (32, 1200), (64, 800), (128, 800), (16, 2000), (128, 500)]) == [
        (16, 2000),
        (32, 1200),
        (64, 800),
        (128, 500),
    ]


def test_a_point_over_its_budget_is_an_error_row_and_the_sweep_goes_on(client, tmp_path):
    """Last in the module: it restarts one of the cluster's workers. GEMV 4096 at batch 16 takes
    about 6 s to lower; the fpga GEMV under a second."""
    big = ROOT / "instances" / "micro" / "gemv-4096-b16-hbm2-64ch.yaml"
    points = build_points([big, GEMV], [], PointOptions(methods=("greedy",)))
    result = run_points(points, client, tmp_path / "out", budget=1.5)
    (slow,), (fast,) = ([r for r in result.records if r["index"] == i] for i in (0, 1))
    assert slow["outcome"] == Outcome.ERROR and "budget of 1.5 s" in slow["message"]
    assert fast["outcome"] == Outcome.DONE


LAYER = ROOT / "instances" / "small" / "tiny-llama-2l-hbm2-8ch.yaml"
HOST_AXES = ["host.dispatch_cycles=50,400", "host.sync_cycles=5,80"]
TIMED = ("solve_seconds", "phase_seconds")  # wall-clock figures: the only fields that may differ


def test_a_host_sweep_with_shared_timings_equals_one_without(client, tmp_path):
    """Host-only axes on a two-layer program: the points' task timings come from the workers'
    caches, and every file and record equals those of the same sweep timed afresh at every point."""
    points = build_points([LAYER], [Axis.parse(a) for a in HOST_AXES], OPTIONS)
    client.restart()  # fresh worker processes: empty caches
    runs = {}
    for share in (False, True):
        out = tmp_path / f"share-{share}"
        result = run_points(points, client, out, share_timings=share)
        write_results(out, points, {r["key"]: r for r in result.records}, zipped=False, title="test")
        runs[share] = (out, result)
        if not share:
            assert all(s["fingerprints"] == 0 for s in client.run(worker_timing_stats).values())  # nothing kept
    stats = list(client.run(worker_timing_stats).values())
    assert all(s["fingerprints"] == 1 for s in stats)  # one fingerprint for the four hardware points
    hits, misses = sum(s["hits"] for s in stats), sum(s["misses"] for s in stats)
    assert misses > 0 and hits > misses  # each worker timed its first point, then reused it
    (a, ra), (b, rb) = runs[False], runs[True]
    assert (a / CSV_NAME).read_bytes() == (b / CSV_NAME).read_bytes()
    assert (a / "report.html").read_bytes() == (b / "report.html").read_bytes()
    strip = lambda rec: {**rec, "seconds": None, "report": {k: v for k, v in rec["report"].items() if k not in TIMED}}  # noqa: E731
    assert [strip(r) for r in ra.records] == [strip(r) for r in rb.records]
    assert all(r["outcome"] == Outcome.DONE for r in rb.records)
    cycles = {
        tuple(r["coords"].values()): r["report"]["simulated_cycles"] for r in rb.records if r["method"] == "cpsat"
    }
    assert len(set(cycles.values())) > 1  # the host fields do change the program's cycles
