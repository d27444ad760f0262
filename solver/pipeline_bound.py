"""The hardware bound's CRITICAL_PATH term where a program may run a batch as micro-batches.

On a device whose HOP and EPI take batch ranges (ISA 1.5), a program may run every op of the
graph once per micro-batch, down to one batch row each (solver/micro_batch.py emits two), and
overlap one micro-batch's host work with another's MACs; attention may also be cut by head
ranges (ISA 1.4; a HOP or EPI cuts by heads or by rows, not both). The chain of whole ops
(`hardware_bound.critical_path_bound`) then no longer bounds every program. What does, for each
op i of the graph:

    T >= end(i) + rest(i)

- first(i): the least cycle any piece of op i can start: its rows must have passed every op
  before it, each as a piece of at least one batch row (or one head, for the ops of a
  score -> softmax -> context chain): the longest path to i over such pieces' least durations
  (hardware_bound's `_earliest_finish` at that share: MACs, host work and epilogue scaled by it; the syncs, the
  signal to the channels and back, whole, as every piece pays them).
- end(i): the least cycle its last piece can end when its first can start at first(i): all of
  its MACs (the units do them whatever the pieces), the syncs, and the last piece's epilogue
  only (the earlier ones overlap later MACs); for a host op all of its work (the host runs one
  instruction at a time); a gemv's link reads, for its host part, from cycle 0 on.
- rest(i): after its last piece, that piece's rows still pass every op after it: the longest
  path from i to the end over pieces' least durations.

A piece's least duration is at least its share of the whole op's (every work term the bound
counts grows with the rows a piece holds, and what does not, row changes, syncs, is counted
whole), so the smallest piece gives the least path. No first fill on the pieces' MACs (a piece
may follow another without a gap): the bound is weaker, not wrong. The term is the largest over
i; at batch 1 (or ISA < 1.5) the chain of whole ops stays.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from hwmodel import Hardware
from hwmodel.host_costs import op_batch
from ir import OpKind, Program

BIG = 1 << 40  # a start late enough that the link reads (from cycle 0) are done by then


def batch_rows(program: Program) -> int:
    """The batch a program's ops share (the least leading axis of an op a batch range may cut; 1:
    none)."""
    rows = [op_batch(program, op) for op in program.ops]
    return min((r for r in rows if r > 0), default=1)


def _scaled(w, share: float):
    """An OpWork (solver/hardware_bound.py) scaled to a piece's share."""
    if w is None:
        return None
    return replace(w, pim=w.pim * share, link=w.link * share, host=None if w.host is None else w.host * share)


def pipelined_path_bound(
    hw: Hardware, program: Program, work: list, finish: Callable[..., int], chains: dict, first_fill: float = 0.0
) -> int:
    """CRITICAL_PATH with batch ranges: max over ops of end + rest (module docstring). `work`: the
    PIM-capable ops' OpWork; `finish`: hardware_bound._earliest_finish; `chains`: the ops of
    score -> softmax -> context chains a program may cut by heads (hardware_bound.head_chains)."""
    pim_work = iter(work)
    per_op = [next(pim_work) if op.pim_capable else None for op in program.ops]
    producer = {t: i for i, op in enumerate(program.ops) for t in op.outputs}
    n = len(program.ops)
    piece = [0] * n  # least duration of a piece of op i (its link reads, if any, taken as done)
    share = [1.0] * n
    preds: list[list[int]] = []
    fed = [False] * n
    for i, op in enumerate(program.ops):
        preds.append(sorted({producer[t] for t in op.inputs if t in producer}))
        fed[i] = op.pim_capable and op.inputs[0] in producer
        heads = op.attrs.get("heads", 1) if i in chains else 1
        share[i] = 1.0 / max(op_batch(program, op), heads, 1)  # its smallest piece (batch 0: not cut)
        if op.kind is not OpKind.kv_append:
            scaled = _scaled(per_op[i], share[i])
            piece[i] = finish(hw, program, i, scaled, BIG, fed[i], 0.0, share[i]) - BIG
    first = [0] * n
    for i in range(n):  # topological order
        first[i] = max((first[p] + piece[p] for p in preds[i]), default=0)
    rest = [0] * n
    for i in range(n - 1, -1, -1):
        for p in preds[i]:
            rest[p] = max(rest[p], piece[i] + rest[i])
    ends = (finish(hw, program, i, per_op[i], first[i], fed[i], first_fill, 1.0, share[i]) + rest[i] for i in range(n))
    return max(ends, default=0)
