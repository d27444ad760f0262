"""Hardware description: the validated data model of a bank-level PIM DRAM device.

Everything here is data. Algorithms (the simulator, the solver's cost model) read a
`Hardware` and never re-check what these models guarantee.
"""

from __future__ import annotations

import re
from enum import Enum
from math import ceil
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# The DRAM and PIM commands the timing table may name. An instruction of the ISA issues one
# of these on a channel's command bus, to one bank or to a set of banks (all-bank mode).
# REFSB (per-bank refresh: one bank, the others keep working) only on devices with
# timing.refresh_mode = per_bank.
COMMANDS: tuple[str, ...] = ("ACT", "PRE", "RD", "WR", "REF", "MAC", "WRGB", "RDACC", "REFSB")
SCOPES: tuple[str, ...] = ("bank", "bank_group", "rank", "channel")
RefreshMode = Literal["all_bank", "per_bank"]
_TERM = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$|^-?[0-9]+$")


class CommandBus(str, Enum):
    """Which channels share a command bus (organization.command_bus)."""

    #: every channel has its own row and column command bus (GDDR6, the FPGA prototype)
    PER_CHANNEL = "per_channel"
    #: channels 2k and 2k+1 are the two pseudo-channels of one HBM channel and share its row
    #: command bus and its column command bus (JESD235 / JESD238 pseudo-channel mode): a row and a
    #: column command may go in one cycle, two row (or two column) commands of the pair may not,
    #: and an ACT holds the row bus tACT_BUS cycles
    SHARED_PAIR = "shared_pair"


#: commands on the row command bus; the others (RD, WR, MAC, WRGB, RDACC) use the column bus
ROW_COMMANDS: tuple[str, ...] = ("ACT", "PRE", "REF", "REFSB")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Organization(_Strict):
    """Shape of the memory: channels (pseudo-channels) x ranks x bank groups x banks."""

    channels: int = Field(ge=1, le=4096)
    ranks: int = Field(default=1, ge=1, le=8)
    bank_groups: int = Field(ge=1, le=16)
    banks_per_group: int = Field(ge=1, le=16)
    rows: int = Field(ge=1, le=1 << 20, description="rows per bank")
    columns: int = Field(ge=1, le=1024, description="bursts (column accesses) per row")
    burst_bytes: int = Field(ge=2, le=256, description="bytes moved by one column access")
    command_bus: CommandBus = Field(
        default=CommandBus.PER_CHANNEL,
        description="per_channel: each channel issues on command buses of its own; shared_pair: "
        "channels 2k and 2k+1 (the pseudo-channels of one HBM channel) share its row and its column "
        "command bus (JESD235/JESD238 pseudo-channel mode; with an odd count the last channel has its "
        "buses alone)",
    )

    @property
    def shared_bus(self) -> bool:
        """True if channels 2k and 2k+1 share their command buses."""
        return self.command_bus is CommandBus.SHARED_PAIR

    @property
    def banks_per_rank(self) -> int:
        return self.bank_groups * self.banks_per_group

    @property
    def banks_per_channel(self) -> int:
        return self.ranks * self.banks_per_rank

    @property
    def row_bytes(self) -> int:
        return self.columns * self.burst_bytes

    @property
    def bank_bytes(self) -> int:
        return self.rows * self.row_bytes

    @property
    def channel_bytes(self) -> int:
        return self.banks_per_channel * self.bank_bytes

    @property
    def capacity_bytes(self) -> int:
        return self.channels * self.channel_bytes

    def bank_group_of(self, bank: int) -> int:
        """Bank index within a channel -> global bank-group index (rank-major)."""
        return bank // self.banks_per_group

    def rank_of(self, bank: int) -> int:
        return bank // self.banks_per_rank


class PIM(_Strict):
    """The processing units beside the banks and the channel's global buffer."""

    banks_per_pu: int = Field(ge=1, le=4, description="1 = AiM-like, 2 = HBM-PIM-like")
    lanes: int = Field(ge=1, le=128, description="multipliers per unit (elements per MAC)")
    dtype: Literal["fp16", "bf16"] = "fp16"
    acc_dtype: Literal["fp32"] = "fp32"
    acc_registers: int = Field(ge=1, le=1024, description="fp32 accumulators per unit")
    global_buffer_bytes: int = Field(ge=2, le=1 << 20, description="per channel, holds the broadcast input")
    gb_write_path: Literal["data_bus", "dedicated"] = Field(
        default="data_bus",
        description="how WRGB reaches the global buffer: over the data bus as column writes (HBM-PIM: "
        "read/write turnarounds against MACs apply) or by a dedicated path (AiM: none)",
    )

    @property
    def element_bytes(self) -> int:
        return 2


class Host(_Strict):
    """The host side: link to each channel, a vector unit, a matrix unit, dispatch/sync costs."""

    link_bytes_per_cycle: float = Field(gt=0, description="per channel, in memory-clock cycles")
    vector_elements_per_cycle: int = Field(ge=1, description="host vector unit throughput")
    matrix_macs_per_cycle: int = Field(ge=1, description="host GEMM throughput (MACs per cycle)")
    dispatch_cycles: int = Field(ge=0, description="fixed cost of launching one host op")
    sync_cycles: int = Field(ge=0, description="signal-to-wait latency between streams")
    persistent_kernel: bool = Field(
        True,
        description="the host keeps a kernel launched while it waits for a unit's signal (a chained "
        "instruction may follow a WAIT); false: the first host instruction after a WAIT launches anew",
    )


class TimingConstraint(_Strict):
    """One row of the timing table (Ramulator style).

    A command `next` to a target in the same `scope` as an earlier command `prev` may issue
    no earlier than `latency` cycles after it; with `window` = N, after the N-th most recent
    `prev` in that scope (the four-activate window: prev=ACT, next=ACT, window=4, tFAW).
    `latency` is a parameter name, an integer, or a sum of them ("CWL + BL2 + tWR").
    """

    prev: str
    next: str
    scope: str
    latency: str | int
    window: int | None = Field(default=None, ge=2, le=64)
    when: Literal["data_bus", "dedicated"] | None = Field(
        default=None, description="the row applies only where pim.gb_write_path has this value"
    )

    @field_validator("prev", "next")
    @classmethod
    def _known_command(cls, v: str) -> str:
        if v not in COMMANDS:
            raise ValueError(f"unknown command {v!r} (known: {', '.join(COMMANDS)})")
        return v

    @field_validator("scope")
    @classmethod
    def _known_scope(cls, v: str) -> str:
        if v not in SCOPES:
            raise ValueError(f"unknown scope {v!r} (known: {', '.join(SCOPES)})")
        return v

    def terms(self) -> list[tuple[int, str]]:
        """The latency as signed terms: "CL + BL2 + 2 - CWL" -> [(1,CL),(1,BL2),(1,2),(-1,CWL)]."""
        return latency_terms(self.latency)


def latency_terms(latency: int | str) -> list[tuple[int, str]]:
    """A latency expression (a sum and difference of parameters and integers) as signed terms:
    the one parser of the timing table's rows and the completion table."""
    if isinstance(latency, int):
        return [(1, str(latency))]
    text = latency.replace("-", " - ").replace("+", " + ").split()
    out: list[tuple[int, str]] = []
    sign = 1
    for tok in text:
        if tok in "+-":
            sign = -1 if tok == "-" else 1
        else:
            out.append((sign, tok))
            sign = 1
    return out


class Timing(_Strict):
    tCK_ns: float = Field(gt=0)
    params: dict[str, int]
    constraints: list[TimingConstraint]
    # Refresh scheduling (JEDEC: JESD235 HBM2 and JESD79-4 DDR4 section "Refresh command
    # scheduling"; GDDR6 JESD250 has the same limits): every tREFI a REF is due; at most 8 may be
    # postponed (owed), at most 8 pulled in (issued ahead; more earn no credit), and the interval
    # between two REFs is at most 9 x tREFI.
    max_postponed_refresh: int = Field(default=8, ge=0, le=64)
    max_pulled_in_refresh: int = Field(default=8, ge=0, le=1 << 20)
    max_refresh_interval: int = Field(
        default=9, ge=1, le=1 << 20, description="most tREFI intervals between two REFs (and from the start)"
    )
    # Per-bank refresh (HBM2 REFSB, JESD235; GDDR6 REFpb, JESD250) as a hardware option: with
    # per_bank the device also takes REFSB (one bank refreshed for tRFCSB while the others work,
    # tRREFD between two). The refresh obligation is then counted per bank: every bank needs one
    # refresh (a REF or a REFSB of it) per tREFI, under the same limits (8 owed, 8 pulled in,
    # 9 x tREFI between two refreshes of a bank).
    refresh_mode: RefreshMode = Field(
        default="all_bank", description="all_bank: REF only; per_bank: REF and REFSB (per-bank refresh)"
    )

    @field_validator("params")
    @classmethod
    def _non_negative(cls, v: dict[str, int]) -> dict[str, int]:
        for name, value in v.items():
            if value < 0:
                raise ValueError(f"parameter {name} = {value} is negative")
        for required in REQUIRED_PARAMS:
            if required not in v:
                raise ValueError(f"missing timing parameter {required}")
        return v

    @model_validator(mode="after")
    def _resolve(self) -> Timing:
        for i, c in enumerate(self.constraints):
            for _, term in c.terms():
                if not _TERM.match(term):
                    raise ValueError(f"constraints[{i}].latency: cannot parse term {term!r}")
                if not term.lstrip("-").isdigit() and term not in self.params:
                    raise ValueError(f"constraints[{i}] ({c.prev}->{c.next}): unknown timing parameter {term!r}")
            if self.latency_of(c) < 0:
                raise ValueError(f"constraints[{i}] ({c.prev}->{c.next}): negative latency")
        if self.params["tRFC"] >= self.params["tREFI"]:
            raise ValueError(
                f"params.tRFC = {self.params['tRFC']} must be shorter than the refresh interval "
                f"tREFI = {self.params['tREFI']}"
            )
        if self.params["tRFCSB"] >= self.params["tREFI"]:
            raise ValueError(
                f"params.tRFCSB = {self.params['tRFCSB']} must be shorter than the refresh interval "
                f"tREFI = {self.params['tREFI']}"
            )
        return self

    def rule(self, prev: str, next: str, scope: str) -> int:
        """The least gap the table puts between `prev` and `next` in one unit of `scope`: the
        largest latency of its non-window rows for that triple (0: none). Figures derived from the
        rules (the hardware bound) read them here, so a row overridden by index moves them too."""
        return max(
            (
                self.latency_of(c)
                for c in self.constraints
                if (c.prev, c.next, c.scope) == (prev, next, scope) and not c.window
            ),
            default=0,
        )

    def latency_of(self, c: TimingConstraint) -> int:
        return sum(s * (int(t) if t.lstrip("-").isdigit() else self.params[t]) for s, t in c.terms())

    def p(self, name: str) -> int:
        return self.params[name]


# Parameters derived from other fields, never written in a preset (the loader adds them):
#   tLINK - cycles one burst occupies the channel's link to the host (organization.burst_bytes /
#           host.link_bytes_per_cycle, rounded up); the timing table spaces every transfer over
#           the link (RD, WR, WRGB, RDACC) on a channel by it.
DERIVED_PARAMS: tuple[str, ...] = ("tLINK",)


def link_burst_cycles(burst_bytes: int, link_bytes_per_cycle: float) -> int:
    """Cycles one burst of `burst_bytes` occupies a link of `link_bytes_per_cycle` (at least 1)."""
    return max(1, ceil(burst_bytes / link_bytes_per_cycle - 1e-9))


# Parameters every preset must define: the simulator and the cost model read them by name.
REQUIRED_PARAMS: tuple[str, ...] = (
    "CL",
    "CWL",
    "BL2",
    "tRCDRD",
    "tRCDMAC",  # ACT -> MAC (AiM: nRCDRDMAC, longer than a plain read's; HBM-PIM: tRCDRD)
    "tRCDWR",
    "tRP",
    "tRAS",
    "tRC",
    "tCCD_S",
    "tCCD_L",
    "tRRD_S",
    "tRRD_L",
    "tFAW",
    "tWR",
    "tRTP",
    "tWTR_S",
    "tWTR_L",
    "tREFI",
    "tRFC",
    "tMAC",
    "tMACL",
    "tGB",
    "tACT_BUS",
    "CL_ACC",  # RDACC's read latency (HBM-PIM reads GRF_B with RD: CL; AiM's RD_MAC: nCLREG 0)
    "CWL_GB",  # WRGB's write latency (HBM-PIM writes GRF_A with WR: CWL; AiM's WR_GB: nCWLGB 1)
    "RTW_GAP",  # read-to-write turnaround beyond CL + BL2 - CWL (HBM2: 2; GDDR6: 3 + tWPRE 1)
    "tRFCSB",  # per-bank refresh: REFSB -> ACT of the refreshed bank (HBM2 tRFCSB, GDDR6 tRFCpb)
    "tRREFD",  # per-bank refresh: REFSB -> REFSB or ACT of another bank of the rank
)

# Completion latency of a command: when its effect is done (used by SIG, the makespan and the
# decoder's task ends). A latency is a sum of parameters.
COMPLETION: dict[str, str] = {
    "RD": "CL + BL2",
    "RDACC": "CL_ACC + BL2",
    "WR": "CWL + BL2",
    "WRGB": "CWL_GB + BL2",
    "MAC": "tMACL",
    "ACT": "tRCDMAC",
    "PRE": "tRP",
    "REF": "tRFC",
    "REFSB": "tRFCSB",
}


def completion_cycles(timing: Timing) -> dict[str, int]:
    """Per command, COMPLETION evaluated with these parameters."""
    return {c: sum(sg * timing.p(t) for sg, t in latency_terms(expr)) for c, expr in COMPLETION.items()}


class Hardware(_Strict):
    """A complete PIM device: what the compiler targets and the simulator executes."""

    name: str
    isa_version: str = "1.6"
    organization: Organization
    pim: PIM
    host: Host
    timing: Timing

    @field_validator("isa_version")
    @classmethod
    def _implemented_isa(cls, v: str) -> str:
        from .isa import ISA_VERSION

        ours = tuple(int(x) for x in ISA_VERSION.split("."))
        m = re.fullmatch(r"(\d+)\.(\d+)", v)
        if not m or int(m[1]) != ours[0] or int(m[2]) > ours[1]:
            raise ValueError(f"ISA {v} is not implemented by this pimsat (it implements {ours[0]}.0 to {ISA_VERSION})")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Hardware:
        org, pim = self.organization, self.pim
        if org.banks_per_channel % pim.banks_per_pu:
            raise ValueError(
                f"pim.banks_per_pu = {pim.banks_per_pu} does not divide {org.banks_per_channel} banks per channel"
            )
        epb = org.burst_bytes // pim.element_bytes
        if epb % pim.lanes and pim.lanes % epb:
            raise ValueError(
                f"pim.lanes = {pim.lanes} neither divides nor is a multiple of the "
                f"{epb} elements of one {org.burst_bytes} B burst"
            )
        if pim.global_buffer_bytes % org.burst_bytes:
            raise ValueError(
                f"pim.global_buffer_bytes = {pim.global_buffer_bytes} is not a whole number of "
                f"{org.burst_bytes} B bursts"
            )
        for i, c in enumerate(self.timing.constraints):
            if c.when is not None and c.when != pim.gb_write_path:
                raise ValueError(
                    f"timing.constraints[{i}] ({c.prev}->{c.next}) applies when pim.gb_write_path = "
                    f"{c.when}; this hardware has {pim.gb_write_path}"
                )
        if self.timing.refresh_mode == "per_bank" and tuple(map(int, self.isa_version.split("."))) < (1, 3):
            raise ValueError(
                f"timing.refresh_mode = per_bank needs the REFSB instruction of ISA 1.3; this hardware "
                f"implements ISA {self.isa_version}"
            )
        link = link_burst_cycles(org.burst_bytes, self.host.link_bytes_per_cycle)
        if self.timing.params.get("tLINK") != link:
            raise ValueError(
                f"timing.params.tLINK = {self.timing.params.get('tLINK')} must be {link}: it is derived "
                f"from organization.burst_bytes / host.link_bytes_per_cycle"
            )
        return self

    def spec(self) -> dict[str, Any]:
        """The description as written (JSON types), without the derived parameters: what
        `hwmodel.loader.hardware_from_dict` reads back."""
        data = self.model_dump(mode="json")
        for name in DERIVED_PARAMS:
            data["timing"]["params"].pop(name, None)
        return data

    # --- derived figures -------------------------------------------------------------------
    @property
    def pus_per_channel(self) -> int:
        return self.organization.banks_per_channel // self.pim.banks_per_pu

    @property
    def total_pus(self) -> int:
        return self.pus_per_channel * self.organization.channels

    @property
    def elements_per_burst(self) -> int:
        return self.organization.burst_bytes // self.pim.element_bytes

    @property
    def link_cycles(self) -> int:
        """Cycles one burst occupies the channel's link to the host (tLINK)."""
        return self.timing.p("tLINK")

    @property
    def gb_bursts(self) -> int:
        return self.pim.global_buffer_bytes // self.organization.burst_bytes

    @property
    def mac_interval(self) -> int:
        """Cycles between two MACs on one channel: tMAC, or longer when a burst holds more
        elements than the unit has lanes (it then takes several passes)."""
        return self.timing.p("tMAC") * max(1, self.elements_per_burst // self.pim.lanes)

    def pu_of(self, bank: int) -> int:
        return bank // self.pim.banks_per_pu
