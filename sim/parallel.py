"""Channel streams run on several threads at once: the timing pass of sim/engine.py with jobs > 1.

Channels share no timing state; they meet only through signals (SIG/WAIT, with each other and
with the host stream). The compiled kernel releases the GIL (hwmodel/jit.py: nogil), so up to
`jobs` channel kernels run at the same time, each on its own channel's arrays, all on the one
signal array, while this module's scheduler (the calling thread) runs the host stream and makes
a channel runnable again when the signal its WAIT is parked on is set.

Same results as the serial run, whatever the order the threads run in:

* A channel's timing depends only on its own stream and on the times of the signals its WAITs
  read; a signal is written once (a second write is an error), so every WAIT that releases reads
  the same time in every order. A WAIT that finds its signal unset parks the stream and is
  retried later; where a stream parks changes nothing it measures (the kernel's statistics add
  up across a return, as they do across the slices of a streamed run). So a run without an
  error ends in the same state in every order, and sim/engine's results come from that state in
  channel order.
* Which error is first is the serial run's: the first one met when the streams run one at a
  time in sim/engine.run_serial's order. A parallel run does not reproduce that order; when it
  meets any error (a kernel violation, a refused slice, a host error, a signal set twice, a
  deadlock) it stops and raises `Fallback`, and sim/engine runs the whole program again
  serially from the start, which raises the serial run's error (an erroneous program costs up
  to one more run; a correct one never falls back).

Slices are read on the threads, the first ones too in a streamed run (sim/engine defers them);
streams a decoder builds as they are read (hwmodel.streams.
LazyStream: its parts share caches between channels) are read by one thread at a time, streams
read from files (RecordStream) by any number.

Signal indices are handed out in order of first sight (sim.encode.SignalMap); a streamed run
meets new signals as it reads slices, in an order that depends on the threads, and the signal
array grows. `SimResult.signals` is keyed by signal id (in id order), so the indices do not
show; the array is grown only while no kernel and no host run reads it (`_Gate`).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

import numpy as np

from hwmodel.record_stream import RecordStream

from . import channel as K
from .twins import SignalSetTwice

__all__ = ["Fallback", "run_parallel"]


class Fallback(Exception):
    """The parallel run met an error: run serially to report the serial run's first one."""


class _Gate:
    """Kernels and the host read and write the signal array in place; growing it (a new array)
    waits until none of them runs, and none starts while it grows."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._running = 0
        self._growing = False

    def enter(self) -> None:
        with self._cv:
            while self._growing:
                self._cv.wait()
            self._running += 1

    def leave(self) -> None:
        with self._cv:
            self._running -= 1
            if self._running == 0:
                self._cv.notify_all()

    def grow(self, fn) -> None:
        """Run fn() with no kernel running (the caller is not running one)."""
        with self._cv:
            while self._growing:
                self._cv.wait()
            self._growing = True
            while self._running:
                self._cv.wait()
        try:
            fn()
        finally:
            with self._cv:
                self._growing = False
                self._cv.notify_all()


class _GatedSignals:
    """The run's SignalMap as the feeds see it while threads run: densified by one thread at a
    time, its array replaced only under the gate."""

    def __init__(self, signals, gate: _Gate):
        self._signals, self._gate, self.lock = signals, gate, threading.Lock()
        signals.densify = self.densify  # (an instance attribute: the feeds call it as they read slices)

    def densify(self, table, sel=None):
        with self.lock:
            self._signals.assign(table, sel)
            if self._signals.short():
                self._gate.grow(self._signals.grow)
        return table

    def restore(self) -> None:
        del self._signals.densify


LINE = 64  # bytes of a cache line (x86-64, most ARM cores; 128 on some: a guard of 2 lines)
_SMALL = 1 << 16  # arrays up to this many bytes are moved (the per-instruction times stay)
_LOG = {"log", "lcyc", "lcmd", "lbank", "lmask", "lrow", "lcol", "linstr"}  # the command log's fields stay


def separate(state: dict) -> None:
    """Move a channel state's small arrays (the kernel's scalars, last-command times, counters:
    written at every command) into one block of its own, each array on cache lines no other
    array of any channel shares. Allocated one after another, two channels' arrays may share a
    cache line, and two cores writing it would take turns at the line (false sharing). A
    precaution: on the 64-channel layer of bench/throughput.py the two gave the same walls."""
    small = [
        k
        for k, a in state.items()
        if isinstance(a, np.ndarray)
        and a.dtype == np.int64
        and a.ndim == 1
        and a.nbytes <= _SMALL
        and a.flags.c_contiguous
        and k not in _LOG
    ]
    step = [-(-state[k].nbytes // LINE) * LINE + LINE for k in small]  # (+ a line between arrays)
    block = np.zeros(sum(step) + 4 * LINE, dtype=np.uint8)
    at = -block.ctypes.data % LINE + 2 * LINE
    for k, n in zip(small, step):
        a = state[k]
        new = block[at : at + a.nbytes].view(np.int64)
        new[:] = a
        state[k] = new
        at += n


def run_parallel(run, jobs: int, progress=None, every: float = 0.5) -> tuple[dict[int, int], float]:
    """sim/engine.run_serial on `jobs` threads: ({}, seconds in the kernel, summed over the
    threads) for a run in which every stream ends; raises Fallback on any error or deadlock
    (sim/engine then runs serially). progress: called as in run_serial, at most every `every` s."""

    channels, feeds, states, hr, signals, tab = run.channels, run.feeds, run.states, run.hr, run.signals, run.tab
    C = len(channels)
    for c in range(C):
        if run.runs(c):
            separate(states[c])
    gate = _Gate()
    gated = _GatedSignals(signals, gate)
    produce = threading.Lock()
    total, told = sum(len(ch) for ch in channels), time.monotonic()
    in_kernel = [0.0] * C

    def read_first(s: int) -> None:
        if isinstance(feeds[s].stream, RecordStream):
            feeds[s].load_first()
        else:
            with produce:
                feeds[s].load_first()

    def step(s: int) -> tuple[int, bool]:
        """One kernel call of channel s, and its next slice when a slice ends: (status, more);
        first the channel's first slice if it is not read yet (sim/engine: defer)."""
        if feeds[s].table is None:
            read_first(s)
        gate.enter()
        try:
            tk = time.perf_counter()
            status = K.call(tab, feeds[s].prog, states[s], signals.time)
            in_kernel[s] += time.perf_counter() - tk
        finally:
            gate.leave()
        if status != K.DONE:
            return status, False
        if isinstance(feeds[s].stream, RecordStream):  # records read from a file: nothing shared
            return status, feeds[s].advance(states[s])
        with produce:  # a decoder's streams share caches between channels: one producer at a time
            return status, feeds[s].advance(states[s])

    def host_runs() -> bool:
        """Run the host stream as far as it goes; True if it ended."""
        gate.enter()
        try:
            return hr.run(signals.time)
        finally:
            gate.leave()

    def gated_write(fn) -> None:
        """fn() while the signal array does not grow (kernels may run)."""
        gate.enter()
        try:
            fn()
        finally:
            gate.leave()

    def relay(s: int) -> None:
        """The SIGs of channel s's twins that it has set (sim/twins.py), from this thread."""
        run.relay(s, lock=gated.lock, grow=lambda: gate.grow(signals.grow), write=gated_write)

    blocked: dict[int, int] = {}
    ready = [C] + [c for c in range(C) if run.runs(c)]
    running: dict = {}  # future -> channel
    failed = False
    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="pimsat-sim")
    try:
        while True:
            # wake the streams whose signal is set; the host runs here, in this thread
            while not failed:
                sig = signals.time
                woke = [b for b, sid in blocked.items() if sig[sid] >= 0]
                for b in woke:
                    del blocked[b]
                ready.extend(woke)
                if C not in ready:
                    break
                ready.remove(C)
                try:
                    if not host_runs():
                        blocked[C] = hr.block
                except Exception:
                    failed = True
            while ready and not failed:
                s = ready.pop()
                running[pool.submit(step, s)] = s
            if not running:
                break
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for f in done:
                s = running.pop(f)
                try:
                    status, more = f.result()
                except Exception:  # a slice refused as it was read
                    failed = True
                    continue
                if status == K.ERROR:
                    failed = True
                    continue
                if run.twins is not None:
                    try:
                        relay(s)
                    except SignalSetTwice:
                        failed = True
                        continue
                if status == K.BLOCKED:
                    blocked[s] = int(states[s]["st"][K.ST_BLOCK])
                elif more:
                    ready.append(s)
                    if progress is not None and time.monotonic() - told >= every:
                        progress(run.read(), total)
                        told = time.monotonic()
                if run.pairs is not None:  # (this thread; the partner only if no thread runs it)
                    busy = set(running.values())
                    run.pairs.stopped(s, status == K.DONE and not more, lambda c: c not in busy)
        if failed or blocked:
            raise Fallback()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # (an interrupt: the running kernels end, no new one starts)
        gated.restore()
    return blocked, sum(in_kernel)
