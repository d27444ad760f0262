"""Task timings shared across lowerings (solver.task_timing.TimingCache): hardware that differs only
in fields task timing does not read (the host's dispatch, sync, vector and matrix rates) re-times
no task; a field it reads (the timing table, the PIM units, the organisation, the link rate via
tLINK) is a miss; the results are the same with the cache as without; the cache is bounded.
Oracle calls are counted: every emitted task reaches the simulator through the timing oracle."""

from __future__ import annotations

from pathlib import Path

import pytest
from solver_testkit import counted_oracle, lowered_at, lowering_summary

import solver.task_timing as task_timing
from hwmodel.model import Host
from pimsat.instance import load_instance
from pimsat.pipeline import LoweringCache, SolveOptions, lower_program, run
from solver.task_timing import UNREAD_HOST_FIELDS, TimingCache, timing_fingerprint

ROOT = Path(__file__).resolve().parents[2] / "instances"
GEMV = ROOT / "fpga" / "gemv-64x128-fpga.yaml"
ATTN = ROOT / "fpga" / "attention-gqa-h4-kv2-d16-c15-fpga.yaml"
LAYER = ROOT / "small" / "tiny-llama-2l-hbm2-8ch.yaml"
HOST_ONLY = ["host.dispatch_cycles=37", "host.sync_cycles=3", "host.vector_elements_per_cycle=7",
             "host.matrix_macs_per_cycle=9"]  # fmt: skip


@pytest.mark.parametrize("path", [GEMV, ATTN, LAYER], ids=lambda p: p.stem)
def test_a_host_only_change_times_no_task_and_lowers_alike(path):
    cache = TimingCache()
    with counted_oracle() as calls:
        hw0, _ = lowered_at(path, timings=cache)
        first, misses = calls[0], cache.store(hw0).misses
        seen = set(cache.store(hw0).timings)
        hw, cached = lowered_at(path, HOST_ONLY, timings=cache)
        again = calls[0] - first
        _, fresh = lowered_at(path, HOST_ONLY)
    # no task timed again; only structures the first lowering had no use for are new: the row
    # counts of split modes (solver/split.py) follow the host's rates
    new = set(cache.store(hw).timings) - seen
    assert first > 0 and again == len(new)
    if new:  # MV and weight-read structures of fewer rows than the whole matrix (the split's parts)
        whole = max(k[0][2][2] for k in seen if k[0][0] in ("mv", "rd"))
        assert all(k[0][0] in ("mv", "rd") and k[0][2][2] < whole for k in new)
    assert hw.host.dispatch_cycles == 37  # the host did change, and so do the host tasks ...
    assert lowering_summary(cached) == lowering_summary(fresh)  # ... exactly as without the cache
    assert len(cache) == 1
    store = cache.store(hw)
    assert store.misses == misses + len(new) and misses > 0 and store.hits > 0


@pytest.mark.parametrize(
    "change",
    [
        "timing.params.tRP=20",
        "timing.params.tREFI=3000",
        "timing.params.tRFC=300",
        "pim.lanes=8",
        "pim.acc_registers=4",
        "organization.channels=4",
        "organization.columns=4",
        "host.link_bytes_per_cycle=4",  # tLINK 1 -> 2 on this device: link transfers space out
    ],
)
def test_a_field_timing_reads_is_a_miss(change):
    cache = TimingCache()
    hw0, _ = lowered_at(ATTN, timings=cache)
    with counted_oracle() as calls:
        hw, cached = lowered_at(ATTN, [change], timings=cache)
    assert timing_fingerprint(hw) != timing_fingerprint(hw0)
    assert calls[0] > 0
    assert len(cache) == 2
    _, fresh = lowered_at(ATTN, [change])
    assert lowering_summary(cached) == lowering_summary(fresh)


def test_the_link_rate_enters_through_tlink():
    hw0, _ = lowered_at(ATTN)
    hw1, _ = lowered_at(ATTN, ["host.link_bytes_per_cycle=4"])
    assert hw1.timing.p("tLINK") != hw0.timing.p("tLINK")


def test_the_fingerprint_leaves_out_exactly_the_name_and_the_unread_host_fields():
    inst = load_instance(ATTN)
    base = inst.build_hardware()
    same = [inst.build_hardware([s]) for s in HOST_ONLY] + [base.model_copy(update={"name": "other"})]
    assert {timing_fingerprint(h) for h in same} == {timing_fingerprint(base)}
    assert set(UNREAD_HOST_FIELDS) | {"link_bytes_per_cycle"} == set(Host.model_fields)
    other = [
        "organization.rows=128",
        "organization.bank_groups=1",
        "pim.global_buffer_bytes=128",
        "pim.banks_per_pu=1",
        "timing.tCK_ns=2.0",
        "timing.params.tCCD_L=5",
        "host.link_bytes_per_cycle=64",
    ]
    copies = [
        base.model_copy(update={"isa_version": "1.0"}),
        base.model_copy(update={"timing": base.timing.model_copy(update={"max_postponed_refresh": 4})}),
        base.model_copy(update={"timing": base.timing.model_copy(update={"max_pulled_in_refresh": 2})}),
        base.model_copy(update={"timing": base.timing.model_copy(update={"max_refresh_interval": 5})}),
        base.model_copy(update={"timing": base.timing.model_copy(update={"constraints": base.timing.constraints[1:]})}),
    ]
    prints = {timing_fingerprint(inst.build_hardware([s])) for s in other} | {timing_fingerprint(h) for h in copies}
    assert len(prints) == len(other) + len(copies) and timing_fingerprint(base) not in prints


# the modules that cut, lay out, emit and time a task's commands (the structure key and the
# fingerprint must cover everything they read), and the simulator behind the oracle
TIMING_MODULES = [
    "solver/tiling.py",
    "solver/layout.py",
    "solver/mvshape.py",
    "solver/emit_mv.py",
    "solver/kv_emit.py",
    "solver/host_emit.py",
    "solver/refresh_points.py",
    "solver/relocate.py",
    "solver/symbols.py",
    "solver/task_timing.py",
    "sim/",
]


def test_emission_and_timing_never_read_the_host_fields_left_out(monkeypatch):
    """Every read of a host field left out of the fingerprint, by code of the modules that cut,
    emit and time tasks, while both styles of a layer are lowered and every mode of its greedy
    and naive programs decoded: none (the oracle gets a copy of the device with those fields
    fixed, whose reads do not count)."""
    import sys

    from solver.decode import decode
    from solver.heuristics import solve_greedy, solve_naive
    from solver.payload import Style

    inst = load_instance(LAYER)
    hw, program = inst.build_hardware(), inst.build_program()
    watched = hw.host
    reads: set[tuple[str, str]] = set()
    plain = Host.__getattribute__
    root = str(Path(__file__).resolve().parents[2]) + "/"

    def spy(self, name):
        if name in UNREAD_HOST_FIELDS and self == watched:
            where = sys._getframe(1).f_code.co_filename.removeprefix(root)
            if any(where.startswith(m) for m in TIMING_MODULES):
                reads.add((where, name))
        return plain(self, name)

    monkeypatch.setattr(Host, "__getattribute__", spy)
    lowered = lower_program(hw, program, 4)
    for style, solve in ((Style.OVERLAP, solve_greedy), (Style.NAIVE, solve_naive)):
        problem, lowering = lowered.by_style[style]
        compiled = decode(problem, lowering, solve(problem), placements=True, lazy=False)
        assert sum(len(c) for c in compiled.streams.channels) > 0
    assert not reads, f"task emission or timing reads host fields the fingerprint leaves out: {sorted(reads)}"
    assert task_timing._without_refresh(hw).host.dispatch_cycles == UNREAD_HOST_FIELDS["dispatch_cycles"]


def test_the_pipeline_emits_the_same_program_with_the_cache():
    """The whole pipeline on a layer: a host-only change compiled after another point (cache
    hits) gives the same streams, cycles and bounds as compiled alone."""
    inst = load_instance(LAYER)
    shared = TimingCache()
    for method in ("greedy", "cpsat"):
        opts = SolveOptions(method=method, functional=False, record=True, deterministic_time=1.0, workers=1)
        run(inst, opts, [], cache=LoweringCache(timings=shared))
        with counted_oracle() as calls:
            a = run(inst, opts, HOST_ONLY, cache=LoweringCache(timings=shared))
        b = run(inst, opts, HOST_ONLY, cache=LoweringCache())
        assert calls[0] == 0
        assert a.hardware.host.dispatch_cycles == 37
        assert int(a.sim.cycles) == int(b.sim.cycles) == a.compiled.predicted_cycles
        assert a.compiled.streams.symbols == b.compiled.streams.symbols  # (emitting allocates symbols)
        assert list(a.compiled.streams.host) == list(b.compiled.streams.host)
        assert [list(c) for c in a.compiled.streams.channels] == [list(c) for c in b.compiled.streams.channels]
        assert a.bounds.hardware.as_dict() == b.bounds.hardware.as_dict()
        assert (a.solution.status, a.solution.objective) == (b.solution.status, b.solution.objective)


def test_the_cache_is_bounded():
    inst = load_instance(GEMV)
    cache = TimingCache(size=2)
    hws = [inst.build_hardware([f"timing.params.tRP={v}"]) for v in (10, 11, 12)]
    for hw in hws:
        lower_program(hw, inst.build_program(), 4, cache)
    assert len(cache) == 2
    assert cache.fingerprints == tuple(timing_fingerprint(h) for h in hws[1:])  # the oldest went
    cache.store(hws[1])  # used again: now the most recent
    cache.store(hws[0])
    assert cache.fingerprints == tuple(timing_fingerprint(h) for h in (hws[1], hws[0]))
    # a store past its byte budget starts afresh
    small = TimingCache(size=1, max_bytes=8)
    lower_program(hws[0], inst.build_program(), 4, small)
    assert small.nbytes > 8
    assert small.store(hws[0]).nbytes == 0 == small.nbytes
    with pytest.raises(ValueError):
        TimingCache(size=0)


def test_per_device_helpers_are_bounded():
    """The per-device helpers cached by identity keep only the last few devices (a long-lived
    sweep worker builds a new Hardware for every point)."""
    inst = load_instance(GEMV)
    for v in range(3 * task_timing._IDENTITY_CACHE_SIZE):
        task_timing.max_latency_after(inst.build_hardware([f"host.dispatch_cycles={v}"]))
    wrapper = task_timing.max_latency_after
    cells = [c.cell_contents for c in wrapper.__closure__ if isinstance(c.cell_contents, dict)]
    assert cells and all(len(c) <= task_timing._IDENTITY_CACHE_SIZE for c in cells)


def test_a_sweep_worker_keeps_one_bounded_cache():
    from pimsat.sweep import run as sweep_run

    assert sweep_run.worker_timings() is sweep_run.worker_timings()
    assert sweep_run.worker_timings().size == sweep_run.WORKER_FINGERPRINTS


def test_streamed_programs_relocate_shared_tables_to_the_same_rows(monkeypatch):
    """Timing-only and streamed, as a sweep point runs: the second point's decode relocates the
    encoded tables the first point's made (it emits fewer MV tasks) and its streams, read as the
    simulator reads them, are row for row those of the same point compiled alone."""
    import numpy as np

    from solver.emit_mv import MVEmitter

    inst = load_instance(LAYER)
    emitted = [0]
    plain = MVEmitter._emit

    def counting(self, ci):
        emitted[0] += 1
        return plain(self, ci)

    monkeypatch.setattr(MVEmitter, "_emit", counting)

    def streamed(result):
        s = result.compiled.streams
        return [np.array(c.rows(0, len(c))) for c in s.channels], list(s.host)

    shared = TimingCache()
    opts = SolveOptions(method="greedy", functional=False, record=False)
    run(inst, opts, [], cache=LoweringCache(timings=shared))
    assert shared.nbytes > 0 and shared.stores()[0].layers.nbytes > 0
    emitted[0] = 0
    a = run(inst, opts, HOST_ONLY, cache=LoweringCache(timings=shared))
    with_cache, emitted[0] = emitted[0], 0
    b = run(inst, opts, HOST_ONLY, cache=LoweringCache())
    alone = emitted[0]
    assert with_cache * 10 < alone, (with_cache, alone)  # (2 of 78 when written)
    (ra, ha), (rb, hb) = streamed(a), streamed(b)
    assert a.compiled.streams.symbols == b.compiled.streams.symbols
    assert ha == hb and len(ra) == len(rb) and all(np.array_equal(x, y) for x, y in zip(ra, rb))
    assert int(a.sim.cycles) == int(b.sim.cycles) == b.compiled.predicted_cycles
