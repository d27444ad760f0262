"""Lowering on several processes: the task timings of a large program computed in parallel.

Lowering spends nearly all its time emitting and timing the candidate tilings of each distinct
PIM op shape (solver/lower.py: vector groups x split MAC runs x buffering x channel subsets x
host splits); repeated layers are cache hits. Those timings are pure functions of the hardware
and the task structure, so the distinct shapes can be timed in separate processes, each a
lowering restricted to its ops (`Lowerer.build(only=...)`), and the results merged into the
TimingStore the real (serial) lowering then reads. One shape can outweigh all the others (a
large vocabulary's LM head: 141 of the 213 s of Llama-3-8B's timings on hbm2-pim x128), so each
shape is split further by the channel count of its tilings (`ChannelPart`: the tilings over
all groups, with the split and host modes built on them; over each smaller subset size), and
the parts, most work first, go to whichever process is free. The serial pass makes every choice itself,
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
from .lower import ChannelPart, Lowerer, LoweringError, LowerOptions, group_subsets, make_groups
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
    gemv: bool = False  # (it also has k-split modes)


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
            seen[key] = Root(op.name, shape.matrices * shape.rows * shape.k * shape.vectors, op.kind is OpKind.gemv)
    return sorted(seen.values(), key=lambda r: (-r.work, r.op))


@dataclass(frozen=True)
class Unit:
    """One worker's share of a root: its tilings over the channel counts of `part` (None: all)."""

    op: str
    part: ChannelPart | None
    work: int  # an estimate, for the order only


# the full tilings' part also times the host and split modes and the naive alternative; a
# subset's tilings are emitted over proportionally more rows per channel
FULL_PART_WEIGHT = 3


def units(hw: Hardware, program: Program, options: tuple[LowerOptions, ...]) -> list[Unit]:
    """The roots split by the channel counts of their candidate tilings, most (estimated) work first."""
    counts = set()
    for opt in options:
        groups = make_groups(hw, opt.groups, hw.organization.rows)
        counts |= {sum(len(groups[i].channels) for i in s) for s in group_subsets(groups, opt.subsets)}
    out = []
    for r in roots(program):
        if len(counts) < 2:
            out.append(Unit(r.op, None, r.work))
            continue
        full = max(counts)
        smaller = frozenset(counts - {full})
        out.append(Unit(r.op, ChannelPart(smaller, others=True), r.work * FULL_PART_WEIGHT))
        # a gemv's k-split modes (solver/ksplit.py) are tiled over half of the channels: that part
        # emits them too, as many commands again as its row tilings
        out += [
            Unit(r.op, ChannelPart(frozenset({n})), r.work * full // n * (1 + (r.gemv and 2 * n == full)))
            for n in sorted(smaller)
        ]
    return sorted(out, key=lambda u: (-u.work, u.op, sorted(u.part.counts) if u.part else ()))


# what a forked worker reads (set in the parent before the pool forks: nothing is pickled in)
_JOB: tuple[Hardware, Program, tuple] | None = None


def _time_root(
    op: str, part: ChannelPart | None = None
) -> tuple[dict[tuple, TaskTiming], dict[tuple, bool], dict[tuple, tuple | None]]:
    """In a worker: lower `op` alone in every style (its tilings of `part`), return the timings
    its lowering made."""
    hw, program, options = _JOB
    cache = TimingCache(size=1)
    for opt in options:
        try:
            Lowerer(hw, program, opt, cache).build(only=frozenset({op}), part=part)
        except LoweringError:  # (a part may hold no tiling that fits: the serial pass says so)
            pass
    store = cache.store(hw, renew=False)
    return store.timings, store.split_used, store.append_keys


def warm(hw: Hardware, program: Program, options: tuple, store: TimingStore, jobs: int) -> int:
    """Time the distinct PIM shapes of `program` on `jobs` processes (0: one per core) into
    `store`; the number of timings added (0: serial, the program too small or forking not
    possible here)."""
    global _JOB
    jobs = jobs or available_cores()
    work = units(hw, program, options)
    if jobs < 2 or len(work) < 2 or sum(r.work for r in roots(program)) < PARALLEL_WORK:
        return 0
    if "fork" not in multiprocessing.get_all_start_methods() or multiprocessing.current_process().daemon:
        return 0
    _JOB = (hw, program, options)
    added = 0
    try:
        with ProcessPoolExecutor(min(jobs, len(work)), mp_context=multiprocessing.get_context("fork")) as pool:
            futures = [pool.submit(_time_root, u.op, u.part) for u in work]  # most work first
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
