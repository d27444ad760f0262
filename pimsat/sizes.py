"""Byte counts shown to users: what a program keeps in banks, and human-readable sizes; the
program size above which `solve --out` keeps no command log."""

from __future__ import annotations

# A run keeps the command log (trace.json) for a program of at most this many channel
# instructions when asked for it by size (SolveOptions.record=None, `solve --out`): above, the
# log (a row per command) grows with the program (the Llama-2-7B b16 layer's greedy program, 11 M
# instructions: 7 GB, trace.json 122 MB) and the run stays streamed instead
TRACE_INSTRUCTIONS = 2_000_000


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
