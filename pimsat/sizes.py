"""Byte counts shown to users: what a program keeps in banks, and human-readable sizes."""

from __future__ import annotations


def resident_bytes(program) -> int:
    """Bytes that live in DRAM banks: the matrices PIM streams plus the KV caches (the embedding
    table is gathered by the host)."""
    return program.pim_weight_bytes() + program.kv_bytes()


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.2f} {unit}"
        n /= 1024
    return str(n)
