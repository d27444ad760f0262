"""Derived figures of a hardware description (what `pimsat hw` prints)."""

from __future__ import annotations

from dataclasses import dataclass

from .model import Hardware


@dataclass(frozen=True)
class Figure:
    name: str
    value: float
    unit: str


def figures(hw: Hardware) -> list[Figure]:
    org, pim, host, t = hw.organization, hw.pim, hw.host, hw.timing
    ghz = 1.0 / t.tCK_ns
    internal_bpc = hw.total_pus * org.burst_bytes / hw.mac_interval
    external_bpc = org.channels * host.link_bytes_per_cycle
    macs_per_cycle = hw.total_pus * min(pim.lanes, hw.elements_per_burst) / hw.mac_interval
    return [
        Figure("channels", org.channels, ""),
        Figure("banks per channel", org.banks_per_channel, ""),
        Figure("PIM units", hw.total_pus, ""),
        Figure("capacity", org.capacity_bytes / 2**30, "GiB"),
        Figure("row size", org.row_bytes, "B"),
        Figure("bank size", org.bank_bytes / 2**20, "MiB"),
        Figure("clock", ghz, "GHz"),
        Figure("per-unit internal bandwidth", org.burst_bytes / hw.mac_interval * ghz, "GB/s"),
        Figure("aggregate internal bandwidth", internal_bpc * ghz, "GB/s"),
        Figure("aggregate internal bandwidth", internal_bpc, "B/cycle"),
        Figure("external bandwidth", external_bpc * ghz, "GB/s"),
        Figure("link time per burst (tLINK)", hw.link_cycles, "cycles"),
        Figure("internal / external", internal_bpc / external_bpc, "x"),
        Figure("peak PIM MAC rate", macs_per_cycle * ghz * 2, "GFLOP/s"),
        Figure("host matrix rate", host.matrix_macs_per_cycle * ghz * 2, "GFLOP/s"),
        Figure("refresh overhead", t.p("tRFC") / t.p("tREFI") * 100, "%"),
        *(
            [Figure("per-bank refresh: each bank busy", t.p("tRFCSB") / t.p("tREFI") * 100, "%")]
            if t.refresh_mode == "per_bank"
            else []
        ),
    ]


def internal_bytes_per_cycle(hw: Hardware) -> float:
    return hw.total_pus * hw.organization.burst_bytes / hw.mac_interval
