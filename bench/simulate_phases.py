"""Where the wall time of `pimsat simulate DIR --timing-only --json` goes, phase by phase, in one
process doing what the command does, timed from after the interpreter's own start (issue 20's
profile):

    .venv/bin/python bench/simulate_phases.py STREAMS_DIR [--hw hbm2-pim]
    PYTHONPATH=OTHER_CHECKOUT .venv/bin/python bench/simulate_phases.py STREAMS_DIR   # another commit

Phases: Python and numpy; importing numba; the other imports of the command (click, pydantic,
the hardware model, sim); reading and checking the streams and loading the hardware; numba's
first load of a cached compiled function (it builds its target context: most of numba's start-up
cost); the channel kernel; the rest of the simulation (records -> the kernel's table, checks,
the host, results); the program digest (the command hashes it in a thread while the kernel runs,
here after it, to be counted).
"""

from __future__ import annotations

import time

T0 = time.perf_counter()
import argparse  # noqa: E402

import numpy as np  # noqa: E402

T_NUMPY = time.perf_counter()
import numba  # noqa: E402, F401

T_NUMBA = time.perf_counter()
import pimsat.cli  # noqa: E402, F401
import pimsat.cli_simulate  # noqa: E402, F401
import sim  # noqa: E402
from hwmodel.streams import program_digest  # noqa: E402
from hwmodel.streams_io import read_streams  # noqa: E402
from pimsat.stream_inputs import manifest_inputs  # noqa: E402
from sim import channel as K  # noqa: E402
from sim.timing import compile_tables  # noqa: E402

T_IMPORTS = time.perf_counter()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("streams")
    ap.add_argument("--hw", default=None, help="a preset instead of the manifest's hardware")
    a = ap.parse_args()
    t0 = time.perf_counter()
    ss, manifest = read_streams(a.streams)
    hw, program, _ = manifest_inputs(a.streams, manifest, a.hw, [])
    t1 = time.perf_counter()
    tab = compile_tables(hw)
    prog = np.zeros(K.WIDTH, dtype=np.int64)
    prog[K.C_OP] = K.OP_WAIT  # a WAIT on an unset signal: the kernel returns at once
    K.call(tab, prog, K.new_state(tab, 1, None), np.full(1, -1, dtype=np.int64))
    t2 = time.perf_counter()
    res = sim.simulate(hw, ss, program=program, functional=False, record=False)
    t3 = time.perf_counter()
    program_digest(ss)
    t4 = time.perf_counter()
    kernel = res.phase_seconds["kernel"]
    phases = {
        "python+numpy": T_NUMPY - T0,
        "numba import": T_NUMBA - T_NUMPY,
        "other imports": T_IMPORTS - T_NUMBA,
        "read+check+hw": t1 - t0,
        "numba first load": t2 - t1,
        "kernel": kernel,
        "around kernel": t3 - t2 - kernel,
        "digest": t4 - t3,
        "total": t4 - T0,
    }
    print("  ".join(f"{k} {v:.3f}" for k, v in phases.items()))


if __name__ == "__main__":
    main()
