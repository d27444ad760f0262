"""What lowering hands the decoder with each mode: the tilings it lays out and each task's role.

Solvers never read these (a `Mode.payload` is opaque to them); lowering (solver/lower.py,
solver/split.py) builds them and the decoder (solver/decode.py) and the stream assembly
dispatch on them. The enums are `StrEnum`s:
a member equals and hashes as its value, so caches keyed by them and the streams are the same as
when they were plain strings.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

from .mvshape import MVShape


class Style(StrEnum):
    """Emission style of a PIM task: overlap (the next chunk's buffer writes and the next row's
    activate hidden under the current MACs) or naive (a vendor library's closed-page order)."""

    OVERLAP = "overlap"
    NAIVE = "naive"


class TilingKind(StrEnum):
    MV = "mv"  # rows of a resident matrix dotted on the PIM units
    HOSTGEMV = "hostgemv"  # rows of a gemv computed on the host matrix unit (a split mode)


class Role(StrEnum):
    """What one task of a mode runs. Channel roles name a tiling of the payload by index; host
    roles name the op(s) they launch."""

    MV = "mv"  # the MV commands of tiling i on the task's channels
    APPEND = "append"  # the KV-cache append of an attention job (tiling i's layout)
    RD = "rd"  # a weight read over the link (host dispatch, split modes), tiling i
    EPI = "EPI"  # the epilogue of a PIM op (bias, scale, rounding), op name
    HOP = "HOP"  # a host op, op name
    EPIS = "EPIS"  # one launch of several epilogues (fused group), op names, the later chained
    HOPS = "HOPS"  # one launch of several host ops (an elementwise chain), op names
    HMVS = "HMVS"  # rows of gemvs on the host matrix unit, ((op, first row, rows), ...)
    EPI_HEADS = "EPIH"  # the epilogue of an attention op's head range, (op name, first head, heads)
    HOP_HEADS = "HOPH"  # a softmax on a head range, (op name, first head, heads)
    EPI_BATCH = "EPIB"  # one launch of epilogues on a batch range, (op names, first row, rows)
    HOP_BATCH = "HOPB"  # one launch of host ops on a batch range, (op names, first row, rows)

    @property
    def on_host(self) -> bool:
        return self in HOST_ROLES


HOST_ROLES = frozenset(
    {
        Role.EPI,
        Role.HOP,
        Role.EPIS,
        Role.HOPS,
        Role.HMVS,
        Role.EPI_HEADS,
        Role.HOP_HEADS,
        Role.EPI_BATCH,
        Role.HOP_BATCH,
    }
)


class TaskRole(NamedTuple):
    """A task's role and its argument: a tiling index for channel roles, an op name (EPI, HOP),
    op names (EPIS, HOPS), row ranges (HMVS), (op name, first head, heads) (EPIH, HOPH) or
    (op names, first batch row, rows) (EPIB, HOPB) for host roles."""

    role: Role
    arg: object


@dataclass
class MVPayload:
    """What the decoder needs to emit a PIM mode: tiling over the chosen channels."""

    kind: TilingKind
    op: str
    shape: MVShape
    groups: tuple[str, ...]
    channels: tuple[int, ...]
    style: Style
    append: tuple[str, int] | None = None  # (new k/v tensor, position) for attention jobs
    # the index of the mode's tiling whose rows this one uses (the same resident data laid out
    # the same way: the micro-batches of a gemv, solver/micro_batch.py); None: rows of its own
    shares: int | None = None


@dataclass
class ModePayload:
    """For the decoder: the MV tilings a mode lays out (rows allocated in this order) and the role
    of each of its tasks, by task name."""

    tilings: tuple[MVPayload, ...]
    roles: dict[str, TaskRole]


class TooBig(Exception):
    """A tiling needs more DRAM rows per bank than the device has (`rows`)."""

    def __init__(self, rows: int):
        super().__init__(rows)
        self.rows = rows
