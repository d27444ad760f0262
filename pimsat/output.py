"""Write a solve's outputs to a directory atomically: all files or none."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from hwmodel.atomic import write_text
from hwmodel.streams_io import write_dir_atomically, write_streams

from .pipeline import RunResult


def schedule_dict(r: RunResult) -> dict[str, Any]:
    return {
        "instance": r.instance.name,
        "method": r.solution.method,
        "modes": dict(sorted(r.solution.modes.items())),
        "tasks": [
            {"task": name, "start": start}
            for name, start in sorted(r.compiled.task_starts.items(), key=lambda kv: (kv[1], kv[0]))
        ],
        "refresh": {g: starts for g, starts in sorted(r.compiled.refreshes.items())},
        "rows_used_per_bank": r.compiled.rows_used,
        "groups": {g.name: list(g.channels) for g in r.problem.groups},
    }


class OutputError(ValueError):
    pass


def write_outputs(r: RunResult, report: dict[str, Any], out: str | Path, trace: bool = True) -> Path:
    out = Path(out)
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / "report.json").exists())):
        raise OutputError(
            f"{out}: exists and is not a pimsat output directory (no report.json); refusing to replace it"
        )

    def build(tmp: Path) -> None:
        write_text(tmp / "report.json", json.dumps(report, indent=2) + "\n")
        write_text(tmp / "schedule.json", json.dumps(schedule_dict(r), indent=2) + "\n")
        write_streams(
            r.compiled.streams,
            tmp / "streams",
            {
                "instance": r.instance.model_dump(),
                "program": json.loads(r.program.to_json()),
                "hardware_spec": r.hardware.spec(),
                "seed": r.instance.seed,
                # what the compiler promised: `pimsat simulate` reports a program that runs otherwise
                "compiled": {
                    "method": r.solution.method,
                    "predicted_cycles": r.compiled.predicted_cycles,
                    # False: a timing-only compile (--timing-only), whose streams place no values
                    "functional": bool(getattr(r.sim, "outputs", None)),
                },
            },
        )
        outputs = getattr(r.sim, "outputs", None) or {}
        if outputs:  # a functional run: the host tensors the program leaves, as computed by the simulator
            (tmp / "outputs").mkdir()
            for name, values in sorted(outputs.items()):
                with open(tmp / "outputs" / f"{name.replace('/', '_')}.npy", "wb") as f:
                    np.save(f, np.asarray(values))
        if trace and getattr(r.sim, "log", None) is not None:
            from sim.traces import write_chrome_trace

            names = [op.name for op in r.program.ops]
            write_chrome_trace(
                tmp / "trace.json", r.sim.log, getattr(r.sim, "host_events", None), r.hardware, op_names=names
            )

    return write_dir_atomically(Path(out), build)
