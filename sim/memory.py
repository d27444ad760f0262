"""Data held by the device and the host in functional runs.

Bank memory: one array [columns, E] of the PIM dtype per (channel, bank, row), allocated when
first touched. Banks start as the memory image leaves them: zero wherever no placement put an
element (so the tails of partly filled bursts and rows read as 0, and all-bank MACs over a
shorter partition's tail add 0). Storage: fp16 -> float16, bf16 -> float32 holding bf16-rounded
values.

Global buffer: [gb_bursts, E] per channel, per-burst written flag. Accumulators: fp32 zeros,
[PIM units, acc_registers] per channel.

Host memory: one HostTensor per name (flattened). See HostTensor for initialisation and the
cross-stream ordering check.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from hwmodel.model import Hardware
from hwmodel.streams import Placement
from ir.types import as_stored, round_to, to_numpy_dtype

from .errors import SimulationError


def pim_round(hw: Hardware, values) -> np.ndarray:
    return round_to(hw.pim.dtype, values)


class BankMemory:
    """Rows are allocated per (channel, row) for every bank of the channel at once, so an
    all-bank MAC over one row of several banks is one array gather."""

    def __init__(self, hw: Hardware):
        self.hw = hw
        self.E = hw.elements_per_burst
        self.C = hw.organization.columns
        self.NB = hw.organization.banks_per_channel
        self.rows: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        self._dtype = to_numpy_dtype(hw.pim.dtype)
        self.stored: set[tuple[int, int]] = set()  # (channel, row) that a WR changed after loading

    def _alloc(self, ch: int, row: int) -> tuple[np.ndarray, np.ndarray]:
        r = self.rows.get((ch, row))
        if r is None:
            r = (np.zeros((self.NB, self.C * self.E), dtype=self._dtype), np.zeros((self.NB, self.C), dtype=bool))
            self.rows[(ch, row)] = r
        return r

    def row(self, ch: int, bank: int, row: int) -> tuple[np.ndarray, np.ndarray]:
        """[columns, E] data and [columns] written flags of one bank's row (views)."""
        data, written = self._alloc(ch, row)
        return data[bank].reshape(self.C, self.E), written[bank]

    def gather(self, ch: int, banks: np.ndarray, rows: np.ndarray, col: int, n: int) -> np.ndarray:
        """[len(banks), n, E]: bursts col..col+n-1 of each bank's row."""
        E = self.E
        if (rows == rows[0]).all():
            data, _ = self._alloc(ch, int(rows[0]))
            return data[banks, col * E : (col + n) * E].reshape(len(banks), n, E)
        return np.stack([self.row(ch, int(b), int(r))[0][col : col + n] for b, r in zip(banks, rows)])

    def segments(self, p: Placement):
        """The placement's rows in this device's banks (hwmodel.streams.Placement.segments)."""
        return p.segments(self.C, self.E)

    @staticmethod
    def _values(p: Placement, flat: np.ndarray) -> np.ndarray:
        """flat[elements of p] - a strided view copy instead of a fancy index where possible."""
        last = p.elem_start + p.stride * (p.count - 1) + p.run - 1
        if p.count == 1 or p.elem_start < 0 or p.stride < p.run or last >= flat.size:
            return flat[p.element_indices()]
        if p.elem_start + p.count * p.stride <= flat.size:
            return (
                flat[p.elem_start : p.elem_start + p.count * p.stride]
                .reshape(p.count, p.stride)[:, : p.run]
                .reshape(-1)
            )
        view = np.lib.stride_tricks.as_strided(
            flat[p.elem_start :],
            shape=(p.count, p.run),
            strides=(p.stride * flat.itemsize, flat.itemsize),
            writeable=False,
        )
        return view.reshape(-1)

    def load(self, p: Placement, flat: np.ndarray) -> None:
        """Lay the placement's runs (flat: the tensor, already in the PIM dtype) into the bank."""
        org = self.hw.organization
        where = f"placement of '{p.tensor}' at channel {p.channel} bank {p.bank} row {p.row} col {p.col}"
        if not (0 <= p.channel < org.channels and 0 <= p.bank < self.NB and 0 <= p.col < self.C):
            raise SimulationError("range", f"{where}: channel, bank or column out of range")
        lo = p.elem_start + min(0, p.stride * (p.count - 1))
        hi = p.elem_start + max(0, p.stride * (p.count - 1)) + p.run - 1
        if lo < 0 or hi >= flat.size:
            raise SimulationError("range", f"{where}: elements {lo}..{hi} outside the tensor ({flat.size} elements)")
        vals = self._values(p, flat)
        for r, o, pos, n in self.segments(p):
            if r >= org.rows:
                raise SimulationError("range", f"{where}: runs past the last row ({org.rows} rows)")
            data, written = self._alloc(p.channel, r)
            data[p.bank, o : o + n] = vals[pos : pos + n]
            written[p.bank, o // self.E : -(-(o + n) // self.E)] = True

    def read_back(self, placements: list[Placement], name: str, size: int) -> np.ndarray:
        """The tensor as the banks hold it now (NaN where no placement covers it)."""
        out = np.full(size, np.nan, dtype=np.float32)
        for p in placements:
            if p.tensor != name:
                continue
            idx = p.element_indices()
            vals = np.empty(p.run * p.count, dtype=np.float32)
            for r, o, pos, n in self.segments(p):
                vals[pos : pos + n] = self._alloc(p.channel, r)[0][p.bank, o : o + n]
            out[idx] = vals
        return out


class ResidentView(Mapping):
    """name -> the resident tensor as the banks hold it at the end (computed when asked)."""

    def __init__(self, banks: BankMemory, placements: list[Placement], shapes: dict[str, tuple[int, ...]]):
        self._banks, self._placements, self._shapes = banks, placements, shapes
        self._cache: dict[str, np.ndarray] = {}

    def stored_into(self, name: str) -> bool:
        """Whether a WR wrote into a DRAM row that holds part of `name` (else the banks still
        hold it exactly as loaded)."""
        stored = self._banks.stored
        if not stored:
            return False
        return any(
            (p.channel, r) in stored
            for p in self._placements
            if p.tensor == name
            for r, _o, _pos, _n in self._banks.segments(p)
        )

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._cache:
            shape = self._shapes[name]
            self._cache[name] = self._banks.read_back(self._placements, name, int(np.prod(shape))).reshape(shape)
        return self._cache[name]

    def __iter__(self):
        return iter(self._shapes)

    def __len__(self) -> int:
        return len(self._shapes)


class HostTensor:
    """A host tensor, flattened, in its storage dtype (staging `X#acc` tensors are fp32).

    init     None (every element initialised) or a bool per element.
    staging  an fp32 staging tensor `X#acc`: starts at 0, an accumulate (RDACC, HMV) initialises
             the elements it adds into; a read of an element nothing added into is an error.
    frozen   program inputs and host copies of state: never written.
    contrib  stream -> per element, the last instruction of that stream whose write (or RDACC
             accumulate) the current value contains (-1: none).
    readers  stream -> per element, the last instruction of that stream that read it.
    A read by stream A of a value written by stream B != A, and a write by B of an element A
    read, must be ordered by SIG/WAIT (checked against A's / B's vector clock), not merely by
    the cycles the streams happened to run at.
    """

    def __init__(
        self,
        name: str,
        shape: tuple[int, ...],
        dtype: str,
        value: np.ndarray | None = None,
        frozen: bool = False,
        staging: bool = False,
    ):
        self.name, self.shape, self.dtype, self.frozen, self.staging = name, tuple(shape), dtype, frozen, staging
        size = int(np.prod(shape)) if shape else 1
        if value is None:
            self.value = np.zeros(size, dtype=to_numpy_dtype(dtype))
            self.init: np.ndarray | None = np.zeros(size, dtype=bool)
        else:
            # a frozen tensor is never written: the caller's array itself where it is in storage form
            stored = as_stored(dtype, value) if frozen else round_to(dtype, value)
            self.value = np.ascontiguousarray(stored).reshape(-1)
            self.init = None
        self.contrib: dict[int, np.ndarray] = {}
        self.readers: dict[int, np.ndarray] = {}

    @property
    def size(self) -> int:
        return self.value.size

    def shaped(self) -> np.ndarray:
        if self.frozen:  # the loaded value itself, read-only (a frozen tensor is initialised)
            v = self.value.reshape(self.shape).view()
            v.flags.writeable = False
            return v
        v = self.value.reshape(self.shape).copy()
        if self.init is not None and not self.init.all() and v.dtype.kind == "f":
            v.reshape(-1)[~self.init] = np.nan
        return v
