"""The CLI end to end: solve -> files -> simulate; errors are one line with exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from pimsat.cli import main

ROOT = Path(__file__).resolve().parents[2]
GEMV = ROOT / "instances" / "fpga" / "gemv-64x128-fpga.yaml"
ATTN = ROOT / "instances" / "fpga" / "attention-h2-d16-c31-fpga.yaml"


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_solve_writes_outputs_and_simulate_reproduces(tmp_path):
    out = tmp_path / "run"
    r = invoke("solve", ATTN, "--out", out, "--json", "--time-limit", "5")
    assert r.exit_code == 0, r.output
    rep = json.loads((out / "report.json").read_text())
    for key in (
        "instance",
        "hardware",
        "method",
        "status",
        "objective_cycles",
        "bound_cycles",
        "lower_bound_cycles",
        "simulated_cycles",
        "outputs_match",
        "max_abs_error",
        "violations",
        "solve_seconds",
        "utilization",
        "hardware_bound_cycles",
        "bound_terms",
        "proof_scope",
    ):
        assert key in rep
    assert rep["lower_bound_cycles"] == rep["hardware_bound_cycles"] == max(rep["bound_terms"].values())
    assert rep["hardware_bound_cycles"] <= rep["simulated_cycles"]
    assert rep["proof_scope"] == ("tasks" if rep["status"] == "OPTIMAL" else "none")
    assert rep["outputs_match"] is True and rep["violations"] == 0
    assert rep["simulated_cycles"] == rep["objective_cycles"]
    assert (out / "schedule.json").exists() and (out / "trace.json").exists()
    assert (out / "streams" / "manifest.json").exists() and list((out / "streams").glob("ch*.s"))
    r = invoke("simulate", out / "streams", "--json", "--log", tmp_path / "cmds.csv", "--vcd", tmp_path / "w.vcd")
    assert r.exit_code == 0, r.output
    sim = json.loads(r.output)
    assert sim["cycles"] == rep["simulated_cycles"] and sim["outputs_match"] is True
    # the run kept its command log: the critical channel term by term, as solve reported it
    assert sim["mac_stream"] == rep["mac_stream"]
    assert sim["distance"] == rep["distance"] and rep["distance"]["bound"] == rep["hardware_bound_cycles"]
    assert sum(v for k, v in sim["mac_stream"].items() if k not in ("channel", "macs")) == sim["cycles"]
    assert (tmp_path / "cmds.csv").read_text().startswith("cycle,command,channel")


def test_compare_table_and_csv(tmp_path):
    csv_path = tmp_path / "cmp.csv"
    r = invoke("compare", GEMV, "--methods", "naive,greedy,cpsat", "--csv", csv_path, "--time-limit", "5")
    assert r.exit_code == 0, r.output
    lines = csv_path.read_text().splitlines()
    assert lines[0].startswith("instance,method,status") and len(lines) == 4


def test_missing_and_malformed_inputs_are_one_line(tmp_path):
    r = invoke("solve", tmp_path / "nope.yaml")
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "nope.yaml" in r.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    r = invoke("show", bad)
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "bad.yaml" in r.output
    r = invoke("hw", "hbm2-pim", "--set", "timing.params.tRP=-3")
    assert r.exit_code == 2 and "tRP" in r.output and "negative" in r.output


def test_infeasible_reason_in_hardware_terms(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text("name: big\nprogram: {kind: gemv, n: 4096, k: 4096}\nhardware: {preset: fpga-proto}\n")
    r = invoke("solve", big)
    assert r.exit_code == 2
    assert "infeasible" in r.output and "MiB" in r.output and r.output.count("\n") == 1


def test_timeout_still_returns_a_verified_program():
    r = invoke("solve", ATTN, "--time-limit", "0.001", "--json")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    assert rep["outputs_match"] is True and rep["simulated_cycles"] == rep["objective_cycles"]


def test_info_commands():
    assert invoke("show", ROOT / "instances" / "fpga").exit_code == 0
    r = invoke("hw", "hbm2-pim", "--set", "pim.lanes=32")
    assert r.exit_code == 0 and "aggregate internal bandwidth" in r.output
    schema = json.loads(invoke("schema", "hardware").output)
    assert "organization" in schema["properties"]


def test_console_entry_point_runs():
    exe = Path(sys.executable).with_name("pimsat")
    p = subprocess.run([str(exe), "show", str(GEMV)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "gemv-64x128-fpga" in p.stdout


def test_simulate_rejects_a_tampered_program_precisely(tmp_path):
    import re

    out = tmp_path / "run"
    assert invoke("solve", GEMV, "--out", out, "--method", "greedy").exit_code == 0
    asm = out / "streams" / "ch00.s"
    text = asm.read_text()
    stamps = [m for m in re.finditer(r"^@(\d+) MAC", text, re.M)]
    m = stamps[3]  # a MAC in the middle of a sweep sequence: one cycle early breaks tMAC
    text = text[: m.start(1)] + str(int(m.group(1)) - 1) + text[m.end(1) :]
    asm.write_text(text)
    (out / "streams" / "ch00.bin").unlink()
    r = invoke("simulate", out / "streams")
    assert r.exit_code == 3
    assert r.output.count("\n") == 1 and "cycle" in r.output and "MAC" in r.output


def test_simulate_reports_a_program_slower_than_compiled(tmp_path):
    """The manifest records the compiled program's digest and predicted cycles: simulate says
    whether the program changed since, and by how many cycles it runs slower or faster."""
    import re

    out = tmp_path / "run"
    assert invoke("solve", GEMV, "--out", out, "--method", "greedy").exit_code == 0
    rep = json.loads((out / "report.json").read_text())
    same = json.loads(invoke("simulate", out / "streams", "--json").output)
    assert same["program_modified"] is False and same["compiled_cycles"] == rep["simulated_cycles"]
    assert same["cycles_vs_compiled"] == 0
    asm = out / "streams" / "host.s"
    text = asm.read_text()
    last = list(re.finditer(r"^@(\d+) (HOP|EPI)", text, re.M))[-1]  # the last host op, 7 cycles later
    asm.write_text(text[: last.start(1)] + str(int(last.group(1)) + 7) + text[last.end(1) :])
    (out / "streams" / "host.bin").unlink()
    r = CliRunner().invoke(main, ["simulate", str(out / "streams"), "--json"], catch_exceptions=False)
    assert r.exit_code == 0
    lines = r.output.splitlines()
    note = [x for x in lines if x.startswith("pimsat:")]
    slow = json.loads("\n".join(x for x in lines if not x.startswith("pimsat:")))
    assert slow["program_modified"] is True and slow["cycles_vs_compiled"] == 7
    assert note == [
        f"pimsat: 7 cycles slower than compiled ({rep['simulated_cycles']:,}): the program was changed "
        "since it was compiled"
    ]


def test_more_error_paths_are_one_line(tmp_path):
    # --out never wipes a directory that is not a previous pimsat output
    keep = tmp_path / "precious"
    keep.mkdir()
    (keep / "notes.txt").write_text("important")
    r = invoke("solve", GEMV, "--method", "greedy", "--out", keep)
    assert r.exit_code == 2 and "refusing" in r.output and (keep / "notes.txt").exists()
    # refresh longer than its interval, unknown timing parameter, non-positive limits
    r = invoke("solve", GEMV, "--set", "timing.params.tRFC=5000")
    assert r.exit_code == 2 and "tREFI" in r.output and r.output.count("\n") == 1
    r = invoke("solve", GEMV, "--set", "timing.params.tRCD=1000")
    assert r.exit_code == 2 and "tRCD" in r.output
    assert invoke("solve", GEMV, "--workers", "0").exit_code == 2
    assert invoke("solve", GEMV, "--time-limit", "0").exit_code == 2
    # a model config missing a field, a path that does not exist, a CSV into a new folder
    bad = tmp_path / "cfg.yaml"
    bad.write_text("name: c\nprogram: {kind: model, config: {hidden_size: 10}}\n")
    r = invoke("show", bad)
    assert r.exit_code == 2 and "program.config" in r.output and r.output.count("\n") == 1
    r = invoke("compare", tmp_path / "nosuch.yaml", "--methods", "greedy")
    assert r.exit_code == 2 and "nosuch.yaml" in r.output
    r = invoke("compare", GEMV, "--methods", "greedy", "--csv", tmp_path / "new" / "x.csv")
    assert r.exit_code == 0 and (tmp_path / "new" / "x.csv").exists()


def test_live_progress_line_while_simulating():
    from pimsat.cli_run import LiveProgress

    live = LiveProgress("gemv greedy")
    live.simulating(0, 2_000_000)
    live.simulating(1_000_000, 2_000_000)
    text = str(live.live.renderable)
    assert "gemv greedy" in text and "1.0 M of 2.0 M instructions (50%" in text


def test_bench_flags_a_regression_against_best_known(tmp_path):
    """`pimsat bench --root DIR` (how it runs from an installed package): a tier of one instance,
    its best-known makespan recorded one cycle below what the method achieves is a regression
    (exit 1); `--record` never writes a slower figure, and the JSON holds every report."""
    (tmp_path / "instances" / "fpga").mkdir(parents=True)
    (tmp_path / "instances" / "fpga" / GEMV.name).write_text(GEMV.read_text())
    (tmp_path / "bench").mkdir()
    best = tmp_path / "bench" / "best_known.json"
    r = invoke("bench", "--root", tmp_path, "--tier", "fpga", "--methods", "greedy", "--json", tmp_path / "b.json")
    assert r.exit_code == 0, r.output
    cycles = json.loads((tmp_path / "b.json").read_text())[0]["objective_cycles"]
    best.write_text(json.dumps({"gemv-64x128-fpga": cycles - 1}))
    r = invoke("bench", "--root", tmp_path, "--tier", "fpga", "--methods", "greedy", "--record")
    assert r.exit_code == 1 and "REGRESSION" in r.output
    assert json.loads(best.read_text()) == {"gemv-64x128-fpga": cycles - 1}
    r = invoke("bench", "--root", tmp_path, "--tier", "fpga", "--methods", "fastest")
    assert r.exit_code == 2 and "--methods: fastest" in r.output


def test_every_command_loads_lazily_from_its_module():
    """pimsat.cli.COMMANDS names the modules of every command: importing them all registers
    exactly its commands, and a command imports only its own modules (simulate: no solver, IR
    or bring-up code)."""
    import subprocess
    import sys

    from pimsat.cli import COMMANDS, main

    assert sorted(main.list_commands(None)) == sorted(COMMANDS)
    probe = (
        "import sys; from pimsat.cli import main; main.get_command(None, 'simulate'); "
        "print(sorted(m for m in ('ir', 'solver', 'ortools', 'networkx', 'pimsat.bringup', 'pimsat.cli_run') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_timing_only_json_simulation_imports_no_ir_rich_or_traces(tmp_path):
    """`pimsat simulate DIR --timing-only --json` of a stream folder: start-up loads neither the IR
    (networkx) nor rich (no table printed) nor the trace writers (none asked for) nor, for .bin
    files, the assembler."""
    import subprocess
    import sys

    from hwmodel import load_hardware
    from hwmodel.isa import Instruction
    from hwmodel.streams import StreamSet
    from hwmodel.streams_io import write_streams

    hw = load_hardware("hbm2-pim")
    ch = [Instruction("ACT", (1, 3)), Instruction("RD", (0, 0, 1, 0, 0)), Instruction("PRE", (1,))]
    d = write_streams(StreamSet(hw.name, hw.isa_version, [], [ch], []), tmp_path / "s")
    probe = (
        "import sys; from pimsat.cli import main; "
        f"main(['simulate', {str(d)!r}, '--hw', 'hbm2-pim', '--timing-only', '--json'], standalone_mode=False); "
        "print(sorted(m for m in ('ir', 'networkx', 'rich', 'sim.memory', 'sim.traces', 'solver', "
        "'hwmodel.asm_records') if m in sys.modules), file=sys.stderr)"
    )
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert '"cycles"' in r.stdout and r.stderr.strip().splitlines()[-1] == "[]", r.stderr


def test_simulate_and_solve_with_jobs_give_the_serial_figures(tmp_path):
    """`pimsat simulate --jobs`, `solve/compare --sim-jobs`: the same report as one job (but for
    wall-clock times), streamed and with the command log; the same one-line error for a broken
    program."""
    out = tmp_path / "run"
    assert invoke("solve", GEMV, "--out", out, "--method", "greedy", "--sim-jobs", "2").exit_code == 0
    timed = ("wall_seconds", "commands_per_second")
    for extra in ([], ["--timing-only"], ["--timing-only", "--log", str(tmp_path / "log.csv")]):
        one, two, auto = (
            json.loads(invoke("simulate", out / "streams", "--json", "--jobs", j, *extra).output) for j in "120"
        )
        for d in (one, two, auto):
            for k in timed:
                d.pop(k)
        assert one == two == auto
    a = json.loads((out / "report.json").read_text())
    b = tmp_path / "serial"
    assert invoke("solve", GEMV, "--out", b, "--method", "greedy").exit_code == 0
    assert (b / "streams" / "ch00.bin").read_bytes() == (out / "streams" / "ch00.bin").read_bytes()
    assert json.loads((b / "report.json").read_text())["simulated_cycles"] == a["simulated_cycles"]
    import re

    for ch in ("ch00", "ch01"):  # the last MAC of two channels stamped a cycle early
        asm = out / "streams" / f"{ch}.s"
        text = asm.read_text()
        last = list(re.finditer(r"^@(\d+) MAC", text, re.M))[-1]
        asm.write_text(text[: last.start(1)] + str(int(last.group(1)) - 1) + text[last.end(1) :])
        (out / "streams" / f"{ch}.bin").unlink()
    errs = {j: invoke("simulate", out / "streams", "--jobs", j).output for j in "12"}
    # (the serial run resumes the stream made runnable last first: channel 1 here)
    assert errs["1"] == errs["2"] and "MAC" in errs["1"] and "channel 1" in errs["1"], errs


def test_a_program_over_the_trace_limit_is_written_without_a_trace(tmp_path, monkeypatch):
    """`solve --out` keeps the command log (trace.json) only for programs of at most
    TRACE_INSTRUCTIONS channel instructions; above, the simulation is streamed (memory bounded)
    and everything else is written as before: the same streams, the same report figures."""
    import pimsat.pipeline as pipeline

    small, large = tmp_path / "small", tmp_path / "large"
    r = invoke("solve", GEMV, "--method", "greedy", "--timing-only", "--out", small)
    assert r.exit_code == 0, r.output
    assert (small / "trace.json").exists() and "no trace.json" not in r.output
    monkeypatch.setattr(pipeline, "TRACE_INSTRUCTIONS", 10)
    r = invoke("solve", GEMV, "--method", "greedy", "--timing-only", "--out", large)
    assert r.exit_code == 0, r.output
    assert not (large / "trace.json").exists()
    assert "no trace.json:" in r.output and "over the 10 a command log is kept for" in r.output
    for f in sorted((small / "streams").iterdir()):
        if f.name != "manifest.json":
            assert (large / "streams" / f.name).read_bytes() == f.read_bytes(), f.name
    a, b = (json.loads((d / "report.json").read_text()) for d in (small, large))
    for key in ("simulated_cycles", "objective_cycles", "hardware_bound_cycles", "violations", "stalls"):
        assert a.get(key) == b.get(key), key
    m1, m2 = (json.loads((d / "streams" / "manifest.json").read_text()) for d in (small, large))
    assert m1["program_sha256"] == m2["program_sha256"]
    r = invoke("simulate", large / "streams", "--timing-only", "--json")
    assert r.exit_code == 0 and json.loads(r.output)["cycles"] == b["simulated_cycles"]
    assert "mac_stream" not in json.loads(r.output)  # (a streamed run keeps no log)
    assert a["mac_stream"] is not None and b["mac_stream"] is None
    # a timing-only compile places no values: a functional simulation of it is refused in one line
    r = invoke("simulate", large / "streams")
    assert r.exit_code == 2
    assert "compiled timing-only" in r.output and "add --timing-only" in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_compare_without_an_alternative_measures_what_it_buys(tmp_path):
    """`--without k-split`: the same compare with the k-split modes not offered. On the hbm3
    anchor the k-split is what cpsat takes: 6,039 cycles with it, 6,179 without. The report says
    what was offered; an unknown name is one line, exit 2."""
    anchor = ROOT / "instances" / "micro" / "gemv-4096-hbm3-32pch.yaml"
    got = {}
    for flags in ((), ("--without", "k-split"), ("--without", "k-split,host-gemv")):
        out = tmp_path / f"r{len(flags)}{flags[-1] if flags else ''}.json"
        r = invoke("compare", anchor, "--methods", "cpsat", "--timing-only", "--json", out, *flags)
        assert r.exit_code == 0, r.output
        (rep,) = json.loads(out.read_text())
        got[flags] = (rep["simulated_cycles"], rep["modes"]["gemv"], rep["offered"])
    full = {"fusion": 0, "host-gemv": 1, "k-split": 1, "head-groups": 0, "micro-batch": 0}
    assert got[()] == (6039, "ksplit[all]", full)
    assert got[("--without", "k-split")] == (6179, "pim[all]", {**full, "k-split": 0})
    assert got[("--without", "k-split,host-gemv")] == (6179, "pim[all]", {**full, "k-split": 0, "host-gemv": 0})
    r = invoke("compare", anchor, "--without", "ksplit")
    assert r.exit_code == 2 and "--without: unknown alternative(s) ksplit" in r.output


def test_a_decode_error_is_one_line_and_exit_3(monkeypatch):
    """A solution the decoder cannot turn into a legal program is a compiler bug: one line naming
    the task, exit status 3, no traceback."""
    import solver.decode as decode_mod
    from solver.assemble import DecodeError

    def refuse(*_a, **_k):
        raise DecodeError("task gemv/pim[all]/g0 on g0 cannot start under the refresh rules")

    monkeypatch.setattr(decode_mod, "_timeline", refuse)
    r = invoke("solve", GEMV, "--method", "greedy", "--timing-only")
    assert r.exit_code == 3, r.output
    assert r.output.count("\n") == 1 and "decode: task gemv/pim[all]/g0" in r.output
