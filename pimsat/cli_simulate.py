"""`pimsat simulate`: run a stream folder in the simulator. Its own module with light imports
(hwmodel, sim; the IR only for a folder that records its program), so a simulation starts fast."""

from __future__ import annotations

import json
import time

import click

from .cli_base import CompilerError, UserError, guard, main
from .cli_base import cell as _cell
from .options import SIM_JOBS, SIM_JOBS_HELP, nonempty


@main.command()
@click.argument("streams_dir", type=click.Path())
@click.option("--hw", "preset", default=None, help="Hardware preset/YAML (default: the one recorded in the manifest).")
@click.option("--set", "sets", multiple=True)
@click.option("--timing-only", is_flag=True)
@click.option("--trace", type=click.Path(), default=None, callback=nonempty, help="Chrome/Perfetto trace JSON.")
@click.option("--vcd", type=click.Path(), default=None, callback=nonempty, help="VCD waveform.")
@click.option("--log", "log_path", type=click.Path(), default=None, callback=nonempty, help="Command log CSV.")
@click.option("--json", "as_json", is_flag=True)
@click.option("--jobs", type=SIM_JOBS, default=0, show_default=True, help=SIM_JOBS_HELP)
@guard
def simulate(streams_dir, preset, sets, timing_only, trace, vcd, log_path, as_json, jobs) -> None:
    """Simulate the instruction streams in STREAMS_DIR (written by `pimsat solve --out`)."""
    import sim
    from hwmodel.streams_io import read_streams

    from .stream_inputs import manifest_inputs

    streams, manifest = read_streams(streams_dir)
    hw, program, seed = manifest_inputs(streams_dir, manifest, preset, list(sets))
    functional = not timing_only and program is not None
    if functional and (manifest.get("compiled") or {}).get("functional") is False:
        raise UserError(
            f"{streams_dir}: compiled timing-only (`pimsat solve --timing-only`): its streams place no "
            "values in the banks, so only their timing can be simulated: add --timing-only"
        )
    digest = _Digest(streams, manifest)  # hashed on the other core while the simulation runs
    state = inputs = None
    if functional:
        import ir

        state, inputs = ir.generate_state(program, seed=seed), ir.generate_inputs(program, seed=seed)
    t0 = time.perf_counter()
    try:
        # without a log, trace or VCD to write, a timing-only run is streamed (memory: a window per channel)
        record = bool(functional or log_path or trace or vcd)
        res = sim.simulate(
            hw,
            streams,
            program=program,
            state=state,
            inputs=inputs,
            functional=functional,
            record=record,
            jobs=jobs,
        )
    except sim.SimulationError as e:
        # an emitted program the simulator refuses is a compiler bug; one changed since is not
        changed = _against_compiled(digest, manifest, 0).get("program_modified")
        what = {True: "the program (changed since it was compiled)", False: "the emitted program", None: "the program"}[
            changed
        ]
        raise CompilerError(f"the simulator rejects {what}: {e}") from None
    wall = time.perf_counter() - t0
    match = err = bits = None
    if functional:
        from .pipeline import bit_true_check, compare_outputs

        match, err = compare_outputs(program, res.outputs, ir.run(program, inputs, state), hw.pim.dtype)
        bits = bit_true_check(hw, program, inputs, state, streams, res)
    if log_path or trace or vcd:
        from sim.traces import write_chrome_trace, write_command_log, write_vcd
    if log_path:
        write_command_log(log_path, res.log, hw)
    if trace:
        write_chrome_trace(
            trace,
            res.log,
            getattr(res, "host_events", None),
            hw,
            op_names=[o.name for o in program.ops] if program else None,
        )
    if vcd:
        write_vcd(vcd, res.log, hw)
    summary = res.summary()
    n_cmds = int(sum(summary["commands"].values()))
    compiled = _against_compiled(digest, manifest, int(res.cycles))
    out = {
        "cycles": int(res.cycles),
        "time_us": round(res.cycles * hw.timing.tCK_ns / 1000, 3),
        "dram_commands": n_cmds,
        "wall_seconds": round(wall, 3),
        "commands_per_second": round(n_cmds / wall) if wall > 0 else None,
        "utilization": float(res.utilization),
        "row_hits": summary["row_hits"],
        "row_misses": summary["row_misses"],
        "outputs_match": match,
        "max_abs_error": err,
        "bit_exact": None if bits is None else bits.exact,
        "bit_mismatches": None if bits is None else bits.mismatches,
        "violations": summary["violations"],
        "command_counts": summary["commands"],
        "stall_cycles": {k: int(v) for k, v in sorted(summary["stalls"].items(), key=lambda kv: -kv[1]) if v},
        **compiled,
    }
    if res.log is not None:  # (a run that kept the command log: the critical channel term by term)
        from .mac_stream import Held, mac_stream

        held = (lambda ch: Held.of(streams.channels[ch], res.channel_times[ch])) if res.channel_times else None
        out["mac_stream"] = mac_stream(res.log, hw, int(res.cycles), held)
        if program is not None and out["mac_stream"]:  # ... against the hardware bound, term by term
            from solver.bound_parts import streaming_parts
            from solver.hardware_bound import hardware_bound

            from .mac_stream import distance

            parts = streaming_parts(hw, program, hardware_bound(hw, program))
            out["distance"] = None if parts is None else distance(out["mac_stream"], parts)
    if as_json:
        click.echo(json.dumps(out, indent=2))
    else:
        from rich.table import Table

        from .cli_base import console

        t = Table(title=f"pimsat simulate — {streams_dir}", show_header=False)
        for k, v in out.items():
            if k == "mac_stream" and v:
                from .mac_stream import describe

                v = describe(v)
            elif k == "distance" and v:
                from .mac_stream import describe_distance

                v = describe_distance(v)
            elif isinstance(v, dict):
                v = ", ".join(f"{a} {b:,}" for a, b in list(v.items())[:8]) or "—"
            t.add_row(k.replace("_", " "), _cell(v, k))
        console.print(t)
    if compiled.get("compiled_cycles") is not None and compiled["cycles_vs_compiled"] != 0:
        d = compiled["cycles_vs_compiled"]
        why = (
            "the program was changed since it was compiled"
            if compiled["program_modified"]
            else "the hardware was overridden"
            if preset or sets
            else "the same program on the same hardware"
        )
        click.echo(
            f"pimsat: {abs(d):,} cycles {'slower' if d > 0 else 'faster'} than compiled "
            f"({compiled['compiled_cycles']:,}): {why}",
            err=True,
        )
        if not compiled["program_modified"] and not (preset or sets):
            raise CompilerError(
                f"simulated {int(res.cycles):,} cycles, the compiler predicted "
                f"{compiled['compiled_cycles']:,} for this unmodified program"
            )
    if match is False:
        raise UserError("simulated outputs differ from the reference")
    if bits is not None and not bits.exact:
        raise UserError(f"simulated values differ from the bit-true model: {bits.summary()}")
    _end_process()


def _end_process() -> None:
    """A successful command that is the whole process (the `pimsat` script or `python -m
    pimsat`: click exits right after; not a test's CliRunner, a script calling `main`, nor a
    profiler's run_module) ends it here, its output flushed, without the interpreter's teardown:
    freeing some 600 modules (numba's, numpy's, pydantic's) takes ~0.1 s, a tenth of a short
    run. Nothing is left to do: the results are printed, the files written and closed, the
    digest thread joined."""
    import os
    import sys
    from pathlib import Path

    top = sys.modules.get("__main__")
    spec = getattr(top, "__spec__", None)
    script = Path(getattr(top, "__file__", None) or "").name in ("pimsat", "pimsat.exe", "pimsat-script.py")
    if getattr(top, "main", None) is not main or not (script or getattr(spec, "name", None) == "pimsat.__main__"):
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


class _Digest:
    """The program's digest (hwmodel.streams.program_digest) when the manifest records one,
    computed in a thread started now: hashing releases the GIL, and so does the compiled kernel,
    so on a second core the digest of a long stream costs no wall time. `value()` waits for it
    (and raises what computing it raised)."""

    def __init__(self, streams, manifest: dict):
        self._value = self._error = self._thread = None
        if isinstance(manifest.get("program_sha256"), str):
            import threading

            self._thread = threading.Thread(target=self._run, args=(streams,), daemon=True)
            self._thread.start()

    def _run(self, streams) -> None:
        from hwmodel.streams import program_digest

        try:
            self._value = program_digest(streams)
        except BaseException as e:  # re-raised by value(), in the command's thread
            self._error = e

    def value(self) -> str | None:
        if self._thread is None:
            return None
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value


def _against_compiled(digest: _Digest, manifest: dict, cycles: int) -> dict:
    """What the manifest says was compiled, against what was simulated: the program's digest
    (changed since?) and the predicted cycles (slower / faster?)."""
    recorded = manifest.get("program_sha256")
    modified = None if not isinstance(recorded, str) else digest.value() != recorded
    comp = manifest.get("compiled")
    predicted = comp.get("predicted_cycles") if isinstance(comp, dict) else None
    if not isinstance(predicted, int) or isinstance(predicted, bool):
        return {"program_modified": modified}
    return {"program_modified": modified, "compiled_cycles": predicted, "cycles_vs_compiled": cycles - predicted}
