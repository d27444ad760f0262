"""The fixed order as a relation: for every command, the set of commands it must follow.

The relation is the transitive closure of `commands.fixed_edges` and the segment barriers. All
of them point forward in the emitted order, so one pass in that order closes it (bitsets as
Python ints, bit j = command j)."""

from __future__ import annotations

from .commands import ChannelStream, segments


def predecessors(streams: list[ChannelStream], n: int, edges: list[tuple[int, int, int]]) -> list[int]:
    """pred[b]: bitset of the commands that issue before b in every schedule of the model."""
    into: list[list[int]] = [[] for _ in range(n)]
    for a, b, _d in edges:
        if a >= b:
            raise ValueError(f"fixed edge {a} -> {b} points backwards in the emitted order")
        into[b].append(a)
    pred = [0] * n
    for cs in streams:
        before = 0  # every command of the earlier segments
        for seg in segments(cs):
            for x in seg:
                p = before
                for a in into[x.j]:
                    p |= pred[a] | (1 << a)
                pred[x.j] = p
            for x in seg:
                before |= 1 << x.j
    return pred
