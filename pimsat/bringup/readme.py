"""README.txt of a bring-up bundle: how to load it (docs/bringup.md says more)."""

from __future__ import annotations

from typing import Any


def iverilog_command(params: dict[str, int]) -> str:
    flags = " ".join(f"-Ptb_channel.{k}={v}" for k, v in params.items())
    return f"iverilog -g2012 -I rtl -o tb.vvp {flags} rtl/pim_channel.v rtl/tb_channel.v"


def readme_text(meta: dict[str, Any]) -> str:
    inst = meta["instance"].get("name", "?") if isinstance(meta["instance"], dict) else "?"
    chans = meta["channels"]
    stem = chans[0]["stem"] if chans else "ch00"
    lines = [
        f"pimsat FPGA bring-up bundle: {inst} on {meta['hardware'].get('name', '?')}",
        f"ISA {meta['isa_version']}, pimsat {meta['pimsat_version']}, seed {meta['seed']}, "
        f"{len(chans)} channel(s), {meta['golden']['cycles']:,} cycles.",
        "",
        "Load (Verilog $readmemh; every file is one hex value per line):",
        "  memory/<ch>_b<bank>.hex   bank images: line = row * columns + col, lane j in bits [16j+15:16j]",
        "  host/memory.hex           host memory, 16-bit words; host/symbols.hex: {base, size} per symbol",
        "  program/<ch>.words.hex    128-bit instruction words; program/<ch>.cycles.hex: issue cycles",
        "  rtl/timing.hex, params.hex  the resolved timing table and parameters",
        "Compare against golden/ (same formats): <ch>.rdacc.hex, <ch>.rd.hex, <ch>.cmdlog.hex,",
        "  <ch>.summary.hex, <ch>_b<bank>.final.hex. Host results: golden/outputs/*.npy and .hex.",
        "",
        "Run one channel with the RTL model of the pimsat repository (from its root):",
        "  " + iverilog_command(meta["rtl_parameters"]),
        f"  vvp tb.vvp +bundle=BUNDLE +ch={stem} +out=OUT",
        f"  diff BUNDLE/golden/{stem}.rdacc.hex OUT/{stem}.rdacc.hex   (and the other golden files)",
        "or: pimsat rtl-run BUNDLE. Check the bundle's files: pimsat check-bundle BUNDLE.",
        "manifest.json: hardware, address maps, symbols and sha256 of every file (schema: pimsat schema bundle).",
    ]
    return "\n".join(lines) + "\n"
