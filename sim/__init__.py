"""sim: the cycle-accurate simulator of pimsat's streams - the executable definition of the ISA.

    result = simulate(hw, streams, program, state, inputs)          # functional + timing
    result = simulate(hw, streams, functional=False, record=False)  # timing only, largest instances
    ok, err = verify(result, ir.reference.run(program, inputs, state))

Execution rules (hwmodel/isa.yaml says what each instruction does):

* Streams: `streams.channels[c]` runs on channel c's command bus, `streams.host` on the host unit.
  Within a stream instructions issue in order; a channel instruction's first command issues after
  the previous instruction's last command (a strictly later cycle: one command per cycle).
* Stamped instructions (`cycle` set) issue their first command exactly then, which must be legal;
  unstamped ones at the earliest legal cycle. A sweep (count > 1; RDACC: ceil(4*count/burst_bytes)
  bursts) issues its other commands one after another, each at the earliest legal cycle after the
  previous one (also in stamped streams).
* Timing table: for command `next` on bank set S, every row with that `next` whose scope unit
  (bank / bank group / rank / channel) S touches: next >= last `prev` in that unit + latency; with a
  window N: >= the N-th most recent `prev` + latency. Multi-bank commands are checked against every
  bank of S for bank rows and count once per touched unit. A MAC reads global-buffer burst x no
  earlier than tGB after the WRGB command that wrote x.
* Bank state: ACT needs the bank closed, RD/WR/MAC/PRE open, REF all banks closed; MAC masks at
  most one bank per PIM unit; every bank must be closed at the end of the program.
* Refresh (JEDEC): owed(t) = floor(t / tREFI) - REFs issued before t must stay <=
  max_postponed_refresh for t up to the makespan T, and REFs issued >= floor(T / tREFI); REF #j
  earns credit from cycle (j - max_pulled_in_refresh) x tREFI (an unstamped REF waits for it, a
  stamped earlier one is an error); two REFs, the start and the first REF, and the last REF and T
  are at most max_refresh_interval x tREFI apart.
* Completion (hwmodel.model.COMPLETION): RD issue + CL + BL2, RDACC + CL_ACC + BL2; WR + CWL + BL2,
  WRGB + CWL_GB + BL2; MAC + tMACL; ACT + tRCDMAC;
  PRE + tRP; REF + tRFC; a sweep: its last command's. SIG id is set at max(completion of every
  earlier instruction of the stream, previous instruction's issue + 1 on channels); WAIT id holds
  the stream's next instruction until signal + sync_cycles. Host: see sim/host.py (costs: hwmodel/host_costs.py).
* Data (functional runs): see sim/functional.py and sim/memory.py. Host tensors by symbol name:
  program inputs and host copies of state (a state tensor named in the symbols) start
  initialised and read-only; `X#acc` (fp32 zeros, X's shape) is the staging tensor RDACC adds
  into and EPI reads; `X#host` (X's shape and dtype, uninitialised) is a host copy RD commands
  fill, which a HOP reads in place of a resident X; everything else starts uninitialised. Banks
  hold zeros where no placement put data. WR/WRGB bursts may run past the end of their source
  tensor (read as 0), RD bursts past the end of their destination (dropped). A cross-stream
  dependency through host memory must be ordered by SIG/WAIT, not by luck of timing.
* Not modelled: link bandwidth beyond the command/data-bus rows of the timing table; channels
  with no stream in `streams.channels` (they are not simulated). SIG/WAIT stamps are ignored
  (they issue no command).

Every violation raises SimulationError (sim/errors.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from hwmodel.cores import available_cores
from hwmodel.model import COMMANDS, Hardware
from hwmodel.numerics import tolerance_dtype, within_tolerance
from hwmodel.streams import StreamSet

from .engine import run_timing
from .errors import SimulationError
from .host import epilogue_cycles, host_op_cycles
from .result import HOST_EVENT_DTYPE, LOG_DTYPE, SimResult, StreamTimes

__all__ = [
    "simulate",
    "verify",
    "SimResult",
    "SimulationError",
    "StreamTimes",
    "LOG_DTYPE",
    "HOST_EVENT_DTYPE",
    "host_op_cycles",
    "epilogue_cycles",
    "Verification",
]


# `jobs=0` runs channel streams on every core from this many channel instructions on (below it,
# a run takes a fraction of a second and the threads' start-up and hand-offs cost about as much)
PARALLEL_INSTRUCTIONS = 4_000_000


def simulate(
    hw: Hardware,
    streams: StreamSet,
    program=None,
    state=None,
    inputs=None,
    functional: bool = True,
    record: bool = True,
    progress=None,
    jobs: int = 1,
    yield_to: dict[int, np.ndarray] | None = None,
) -> SimResult:
    """Execute `streams` on `hw`. Functional runs need `program`; `state` / `inputs` default to
    ir.weights.generate_state / generate_inputs (seed 0). Raises SimulationError on any violation.
    A timing-only run without the command log (functional=False, record=False) is streamed: the
    kernel reads each channel a slice at a time, so its memory does not grow with the program,
    and the result keeps no per-instruction channel times (`channel_times` is empty); `progress`
    (instructions read, instructions) is called now and then while it runs. jobs: threads that
    run channel streams at once in the timing pass (sim/parallel.py; 1: one after another; 0: one
    per core for streams of PARALLEL_INSTRUCTIONS or more, else 1); the result, and the error
    raised, are the same for every value. yield_to (the timing oracle's pair timing on a
    shared-bus device): channel -> the bus occupancy (hwmodel/bus.py records) of a partner outside
    the program, to which the channel's unstamped commands yield their bus."""
    if jobs == 0:
        jobs = available_cores() if sum(len(ch) for ch in streams.channels) >= PARALLEL_INSTRUCTIONS else 1
    if functional and program is None:
        raise SimulationError("stream", "a functional run needs the program (or pass functional=False)")
    nsym = len(streams.symbols) if functional or streams.symbols else None  # timing-only probes may omit symbols
    streamed = not functional and not record
    timed = run_timing(
        hw,
        streams.channels,
        streams.host,
        program,
        record,
        nsym,
        streamed=streamed,
        progress=progress,
        jobs=jobs,
        yield_to=yield_to,
    )
    states = timed.channels
    C = len(states)
    nb = hw.organization.banks_per_channel
    hr = timed.host
    res = SimResult(
        hardware=hw.name,
        cycles=int(timed.makespan),
        functional=functional,
        channel_times=[] if streamed else [StreamTimes(s["issue"], s["lastc"], s["done"]) for s in states],
        host_times=StreamTimes(hr.issue, hr.lastc, hr.done),
        counts=np.array([s["counts"] for s in states]).reshape(C, len(COMMANDS)),
        bank_bursts=np.array([s["bbursts"] for s in states]).reshape(C, nb),
        pu_macs=np.array([s["pumacs"] for s in states]).reshape(C, hw.pus_per_channel),
        row_hits=np.array([s["hits"] for s in states]).reshape(C, nb),
        row_misses=np.array([s["misses"] for s in states]).reshape(C, nb),
        refreshes=np.array([int(s["brefs"].min()) for s in states], dtype=np.int64),  # every bank's
        stalls=timed.stalls,
        # by signal id: the dense indices follow the order the streams were read in
        signals=dict(sorted(zip(timed.signal_ids.tolist(), timed.signal_time[: len(timed.signal_ids)].tolist()))),
        mac_interval=hw.mac_interval,
        total_pus=hw.total_pus,
        log=None,
        host_events=np.array(hr.events, dtype=HOST_EVENT_DTYPE) if hr.events else np.zeros(0, HOST_EVENT_DTYPE),
    )
    res.phase_seconds = dict(timed.phases)
    res.channels_run = timed.channels_run
    res.log = timed.log
    if functional:
        t0 = time.perf_counter()
        from ir.weights import generate_inputs, generate_state

        from .functional import Machine

        state = generate_state(program) if state is None else state
        inputs = generate_inputs(program) if inputs is None else inputs
        m = Machine(hw, streams, program, state, inputs, timed)
        m.run()
        for name in program.outputs:
            t = m.host.get(name)
            if t is None or (t.init is not None and not t.init.all()):
                raise SimulationError(
                    "uninitialised",
                    f"program output '{name}' was not (fully) computed by the end of the program",
                    cycle=res.cycles,
                )
            res.outputs[name] = t.shaped()
            res.output_dtypes[name] = program.tensors[name].dtype.value
        res.host = {k: t.shaped() for k, t in m.host.items()}
        res.phase_seconds["functional"] = time.perf_counter() - t0
        from .memory import ResidentView  # (imports ir: only functional runs need it)

        res.resident = ResidentView(
            m.banks, streams.placements, {n: np.shape(state[n]) for n in {p.tensor for p in streams.placements}}
        )
    return res


@dataclass(frozen=True)
class Verification:
    outputs_match: bool
    max_abs_error: float
    per_tensor: dict[str, float]

    def __iter__(self):
        return iter((self.outputs_match, self.max_abs_error))


def verify(
    result: SimResult,
    reference_outputs: dict[str, np.ndarray],
    tolerance_by_dtype: dict[str, float] | None = None,
    arithmetic: str | None = None,
) -> Verification:
    """Compare every program output of a functional run with the reference values, by the one
    tolerance rule (hwmodel.numerics.within_tolerance; `tolerance_by_dtype` overrides entries).
    The dtype is the output's declared one, else guessed from its numpy storage (float16 -> fp16,
    float32 with bf16-exact values -> bf16, other float32 -> fp32, integers exact); with the
    device's `arithmetic` (`hw.pim.dtype`), the coarser of the two (numerics.tolerance_dtype).
    Unpack as `outputs_match, max_abs_error = verify(...)`."""
    if not result.functional:
        raise ValueError("verify needs a functional run")
    per: dict[str, float] = {}
    ok = True
    for name, got in result.outputs.items():
        if name not in reference_outputs:
            raise KeyError(f"reference has no output '{name}'")
        key = tolerance_dtype(result.output_dtypes.get(name) or _dtype_key(got), arithmetic)
        match, per[name] = within_tolerance(got, reference_outputs[name], key, tolerance_by_dtype)
        ok = ok and match
    return Verification(ok, max(per.values(), default=0.0), per)


def _dtype_key(a: np.ndarray) -> str:
    if a.dtype == np.float16:
        return "fp16"
    if a.dtype == np.int32 or a.dtype.kind in "iu":
        return "int32"
    if a.dtype == np.float32:
        bits = a.view(np.uint32)
        return "bf16" if not np.any(bits & 0xFFFF) else "fp32"
    return "fp32"
