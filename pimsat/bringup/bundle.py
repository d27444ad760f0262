"""Write a bring-up bundle for one compiled program, and check one.

    README.txt  manifest.json
    memory/     chNN_bB.hex: the banks as the compiler laid them out (the memory image)
    host/       memory.hex, symbols.hex: the host tensors the channels read, and where
    program/    chNN.words.hex chNN.cycles.hex chNN.s, host.*: instruction images and assembly
    rtl/        timing.hex params.hex: the resolved timing table and parameters the RTL loads
    golden/     per channel: rdacc.hex rd.hex cmdlog.hex summary.hex, chNN_bB.final.hex;
                commands.csv; outputs/<name>.hex and .npy
    streams/    the streams as `pimsat solve --out` writes them (`pimsat simulate` reads it)

Formats: images.py; the address maps: manifest.ADDRESS_MAP (also in the manifest).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import ir
from hwmodel import host_memory
from hwmodel.atomic import write_dir_atomically, write_text
from hwmodel.isa_asm import format_stream
from hwmodel.model import COMMANDS, Hardware
from hwmodel.streams import StreamSet
from hwmodel.streams_io import channel_stem, write_streams
from ir.types import round_to

from . import golden as G
from .fit import check_fits, check_program_fits, rtl_parameters
from .images import burst_lines, f32_lines, hex_lines, instruction_lines, log_lines
from .manifest import ADDRESS_MAP, FORMAT, FORMAT_VERSION, MANIFEST, BundleManifest
from .readme import readme_text


class BundleError(ValueError):
    """A bundle that cannot be written or does not check; one line naming the file and field."""


@dataclass(frozen=True)
class Compiled:
    """What a bundle is made of: the program, its hardware and streams, and where they came from."""

    hardware: Hardware
    program: ir.Program
    streams: StreamSet
    seed: int
    instance: dict
    method: str | None
    test: dict | None = None  # a generated test (testgen.py): kind, seed, what it exercises


def export(c: Compiled, out: Path, source: str) -> BundleManifest:
    """Simulate, replay and reconcile the golden results, and write the bundle to `out` atomically."""
    import sim
    from sim.timing import compile_tables

    hw, prog = c.hardware, c.program
    check_fits(hw, source)
    if hw.timing.refresh_mode != "all_bank":
        raise BundleError(
            f"{source}: timing.refresh_mode = {hw.timing.refresh_mode}: the RTL model (rtl/pim_channel.v) "
            "implements all-bank refresh only (no REFSB)"
        )
    _check_target(out)
    state, inputs = ir.generate_state(prog, seed=c.seed), ir.generate_inputs(prog, seed=c.seed)
    res = sim.simulate(hw, c.streams, program=prog, state=state, inputs=inputs, functional=True, record=True)
    ss = res.stamped(c.streams)  # every command at the cycle it issued (SIG/WAIT stay unstamped)
    banks = G.initial_banks(hw, prog, ss, state)
    nb = hw.organization.banks_per_channel
    nch = len(ss.channels)
    stems = [channel_stem(i, nch) for i in range(nch)]
    initial = {(ch, b): G.bank_array(hw, banks, ch, b) for ch in range(nch) for b in range(nb)}
    sources = G.source_symbols(ss)
    host = {
        s: round_to(hw.pim.dtype, np.asarray(res.host[ss.symbols[s]]).reshape(-1)).astype(np.float16) for s in sources
    }
    gold = G.replay(hw, ss, banks, host)
    G.reconcile(hw, prog, ss, banks, gold, res)
    check_program_fits(
        {
            "instructions per channel": max((len(s) for s in ss.channels), default=0),
            "host image words": sum(v.size for v in host.values()),
            "host symbols": len(ss.symbols),
            "commands per channel": max((int((res.log["channel"] == ch).sum()) for ch in range(nch)), default=0),
            "RDACC values per channel": max((g.rdacc_values().size for g in gold), default=0),
            "RD bursts per channel": max((len(g.rd_bursts(hw.elements_per_burst)) for g in gold), default=0),
        },
        source,
    )
    final = {(ch, b): G.bank_array(hw, banks, ch, b) for ch in range(nch) for b in range(nb)}
    tables = compile_tables(hw)
    e = hw.elements_per_burst

    files: dict[str, str | bytes] = {}
    for (ch, b), arr in initial.items():
        files[f"memory/{stems[ch]}_b{b}.hex"] = burst_lines(arr)
    amap = host_memory.pack((s, host[s].size) for s in sources)
    mem = np.concatenate([host[s] for s in sources]) if sources else np.zeros(0, np.float16)
    files["host/memory.hex"] = hex_lines(mem.view(np.uint16), 4)
    files["host/symbols.hex"] = hex_lines((amap.entry(s) for s in range(len(ss.symbols))), 16)
    for label, stream in [*zip(stems, ss.channels), ("host", ss.host)]:
        w, cyc = instruction_lines(list(stream))
        files[f"program/{label}.words.hex"] = w
        files[f"program/{label}.cycles.hex"] = cyc
        files[f"program/{label}.s"] = format_stream(
            list(stream), f"pimsat ISA {ss.isa_version} -- {hw.name} -- {label}"
        )
    # the RTL model knows the commands up to RDACC (all-bank refresh only: no REFSB, whose rows
    # never apply on a device that refreshes all banks)
    rtl_cmds = COMMANDS.index("REFSB")
    files["rtl/timing.hex"] = hex_lines(
        (
            (int(p) << 56) | (int(n) << 48) | (int(s) << 40) | (int(w) << 32) | int(lat)
            for p, n, s, w, lat in zip(tables.prev, tables.nxt, tables.scope, tables.win, tables.lat)
            if p < rtl_cmds and n < rtl_cmds
        ),
        16,
    )
    org = hw.organization
    params = [*tables.completion[:rtl_cmds], hw.timing.p("tGB")]
    params += [org.bank_group_of(b) for b in range(nb)] + [hw.pu_of(b) for b in range(nb)]
    t = hw.timing
    params += [t.p("tREFI"), t.max_postponed_refresh, t.max_pulled_in_refresh, t.max_refresh_interval, int(res.cycles)]
    files["rtl/params.hex"] = hex_lines(params, 8)
    channels = []
    for ch, g in enumerate(gold):
        mine = res.log[res.log["channel"] == ch]
        done = int(max((int(r["cycle"]) + int(tables.completion[r["command"]]) for r in mine), default=0))
        files[f"golden/{stems[ch]}.rdacc.hex"] = f32_lines(g.rdacc_values())
        files[f"golden/{stems[ch]}.rd.hex"] = burst_lines(g.rd_bursts(e))
        files[f"golden/{stems[ch]}.cmdlog.hex"] = log_lines(res.log, ch)
        files[f"golden/{stems[ch]}.summary.hex"] = hex_lines([len(mine), done, 0], 16)
        channels.append(
            dict(
                index=ch,
                stem=stems[ch],
                instructions=len(ss.channels[ch]),
                commands=len(mine),
                rdacc_values=int(g.rdacc_values().size),
                rd_bursts=len(g.rd_bursts(e)),
                done_cycle=done,
            )
        )
    digest = hashlib.sha256()
    for (ch, b), arr in final.items():
        files[f"golden/{stems[ch]}_b{b}.final.hex"] = text = burst_lines(arr)
        digest.update(text.encode())
    outputs = []
    for name in prog.outputs:
        v = np.asarray(res.outputs[name])
        dtype = prog.tensors[name].dtype.value
        bits = v.view(np.uint16) if v.dtype.itemsize == 2 else v.astype(v.dtype).view(np.uint32)
        files[f"golden/outputs/{name}.hex"] = hex_lines(bits.reshape(-1), 2 * v.dtype.itemsize)
        outputs.append(
            dict(
                name=name,
                dtype=dtype,
                shape=list(v.shape),
                hex=f"golden/outputs/{name}.hex",
                npy=f"golden/outputs/{name}.npy",
            )
        )
    symbols = [
        dict(
            index=i,
            name=n,
            dtype=_host_dtype(prog, n),
            elements=int(host[i].size) if i in host else 0,
            base=amap.bases.get(i),
        )
        for i, n in enumerate(ss.symbols)
    ]
    meta = dict(
        format=FORMAT,
        format_version=FORMAT_VERSION,
        isa_version=ss.isa_version,
        pimsat_version=_version(),
        instance=c.instance,
        seed=c.seed,
        method=c.method,
        hardware=hw.spec(),
        rtl_parameters=rtl_parameters(hw),
        channels=channels,
        host_symbols=symbols,
        golden=dict(cycles=int(res.cycles), final_bank_sha256=digest.hexdigest(), outputs=outputs),
        address_map=ADDRESS_MAP,
        test=c.test,
    )

    def build(tmp: Path) -> None:
        for rel, data in files.items():
            _put(tmp / rel, data)
        (tmp / "golden/outputs").mkdir(parents=True, exist_ok=True)
        for o in outputs:
            np.save(tmp / o["npy"], np.asarray(res.outputs[o["name"]]))
        from sim.traces import write_command_log

        write_command_log(tmp / "golden/commands.csv", res.log, hw)
        extra = {
            "instance": c.instance,
            "program": json.loads(prog.to_json()),
            "hardware_spec": hw.spec(),
            "seed": c.seed,
        }
        extra["compiled"] = {"method": c.method, "predicted_cycles": int(res.cycles)}
        write_streams(ss, tmp / "streams", extra)
        _put(tmp / "README.txt", readme_text(meta))
        meta["files"] = {
            str(p.relative_to(tmp)): dict(sha256=_sha256(p), bytes=p.stat().st_size)
            for p in sorted(tmp.rglob("*"))
            if p.is_file()
        }
        manifest = BundleManifest.model_validate(meta)
        write_text(tmp / MANIFEST, json.dumps(manifest.model_dump(), indent=1) + "\n")

    write_dir_atomically(out, build)
    return BundleManifest.model_validate(meta)


def _put(path: Path, data: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _host_dtype(prog: ir.Program, name: str) -> str:
    base, _, suffix = name.partition("#")
    if suffix == "acc":
        return "fp32"
    t = prog.tensors.get(base)
    return t.dtype.value if t is not None else "unknown"


def _version() -> str:
    from pimsat import __version__

    return __version__


def _check_target(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise BundleError(f"{out}: exists and is not a folder; refusing to replace it")
    if out.is_dir() and any(out.iterdir()) and not (out / MANIFEST).is_file():
        raise BundleError(f"{out}: exists and is not a bundle (no {MANIFEST}); refusing to replace it")


def check_bundle(d: Path) -> BundleManifest:
    """The manifest of bundle `d` after checking its schema and every file's size and sha256;
    BundleError (one line naming the file and field) on the first problem."""
    from pydantic import ValidationError

    from hwmodel.loader import one_line

    path = d / MANIFEST
    if not d.is_dir():
        raise BundleError(f"{d}: not a folder")
    if not path.is_file():
        raise BundleError(f"{path}: missing (not a bring-up bundle)")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BundleError(f"{path}: not valid JSON ({e})") from None
    try:
        m = BundleManifest.model_validate(data)
    except ValidationError as e:
        raise BundleError(one_line(str(path), e)) from None
    for rel, entry in m.files.items():
        p = d / rel
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise BundleError(f"{path}: files.{rel}: not a path inside the bundle")
        if not p.is_file():
            raise BundleError(f"{p}: missing (listed in {MANIFEST} files)")
        if p.stat().st_size != entry.bytes or _sha256(p) != entry.sha256:
            raise BundleError(f"{p}: altered (sha256 differs from {MANIFEST} files.{rel}.sha256)")
    for p in sorted(d.rglob("*")):
        rel = str(p.relative_to(d))
        if p.is_file() and rel != MANIFEST and rel not in m.files:
            raise BundleError(f"{p}: not listed in {MANIFEST} files")
    return m
