"""Lowering on several processes: the task timings of a large program computed in parallel.

Lowering spends nearly all its time emitting and timing the candidate tilings of each distinct
PIM op shape (solver/lower.py: vector groups x split MAC runs x buffering x channel subsets x
host splits); repeated layers are cache hits. Those timings are pure functions of the hardware
and the task structure, so the distinct shapes can be timed in separate processes, each a
lowering restricted to its ops (`Lowerer.build(only=...)`), and the results merged into the
TimingStore the real (serial) lowering then reads. The serial pass makes every choice itself,
in the same order, from the same timings: the lowered problem is the same whatever the number
of processes, and a process that fails only leaves its timings for the serial pass to compute.

Processes are forked (the parent's modules and its compiled simulator kernels are inherited);
where forking is not possible (no `fork` start method, a daemonic worker such as a Dask
sweep's) lowering stays serial.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from hwmodel import Hardware
from hwmodel.cores import available_cores
from ir import OpKind, Program

from .fusion import fusion_groups
from .mvshape import fused_shape, mv_shape
from .task_timing import TaskTiming, TimingCache, TimingStore

# Below this much MAC work (matrix elements x vectors, summed over the distinct PIM shapes) a
# program is lowered serially: forking costs more than it saves (a batch-1 layer is ~0.2 G).
PARALLEL_WORK = 500_000_000


@dataclass(frozen=True)
class Root:
    """A PIM op whose lowering times tasks: a gemv, a fused gemv group's first op, an attention op."""

    op: str
    work: int  # matrix elements x vectors: the emission's size, for balancing


def roots(program: Program) -> list[Root]:
    """One root per distinct PIM shape (later layers repeat the first one's), most work first."""
    fusion = fusion_groups(program)
    members = {m for ms in fusion.values() for m in ms[1:]}
    seen: dict[tuple, Root] = {}
    for op in program.topo_order():
        if op.name in members or op.kind not in (OpKind.gemv, OpKind.attn_score, OpKind.attn_context):
            continue
        if op.name in fusion:
            shape = fused_shape(program, fusion[op.name], "+".join(fusion[op.name]))
        else:
            shape = mv_shape(program, op.name)
        key = (shape.kind_key, shape.matrices, shape.rows, shape.k, shape.vectors, op.name in fusion)
        if key not in seen:
            seen[key] = Root(op.name, shape.matrices * shape.rows * shape.k * shape.vectors)
    return sorted(seen.values(), key=lambda r: (-r.work, r.op))


# what a forked worker reads (set in the parent before the pool forks: nothing is pickled in)
_JOB: tuple[Hardware, Program, tuple] | None = None


def _time_root(op: str) -> tuple[dict[tuple, TaskTiming], dict[tuple, bool], dict[tuple, tuple | None]]:
    """In a worker: lower `op` alone in every style, return the timings its lowering made."""
    from .lower import Lowerer

    hw, program, options = _JOB
    cache = TimingCache(size=1)
    for opt in options:
        Lowerer(hw, program, opt, cache).build(only=frozenset({op}))
    store = cache.store(hw, renew=False)
    return store.timings, store.split_used, store.append_keys


def warm(hw: Hardware, program: Program, options: tuple, store: TimingStore, jobs: int) -> int:
    """Time the distinct PIM shapes of `program` on `jobs` processes (0: one per core) into
    `store`; the number of timings added (0: serial, the program too small or forking not
    possible here)."""
    global _JOB
    jobs = jobs or available_cores()
    work = roots(program)
    if jobs < 2 or len(work) < 2 or sum(r.work for r in work) < PARALLEL_WORK:
        return 0
    if "fork" not in multiprocessing.get_all_start_methods() or multiprocessing.current_process().daemon:
        return 0
    _JOB = (hw, program, options)
    added = 0
    try:
        with ProcessPoolExecutor(min(jobs, len(work)), mp_context=multiprocessing.get_context("fork")) as pool:
            futures = [pool.submit(_time_root, r.op) for r in work]  # most work first: longest first
            for f in futures:
                try:
                    timings, split_used, append_keys = f.result()
                except Exception:  # noqa: BLE001 - the serial pass times what a worker did not
                    continue
                for k, v in timings.items():
                    if k not in store.timings:
                        store.put(k, v)
                        added += 1
                for k, v in split_used.items():
                    store.split_used.setdefault(k, v)
                for k, v in append_keys.items():
                    store.append_keys.setdefault(k, v)
    except OSError:  # no processes to be had: serial
        pass
    finally:
        _JOB = None
    return added
