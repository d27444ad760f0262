"""Write and read a StreamSet as a directory, atomically.

    out/manifest.json   hardware, isa_version, symbols, channel count, file names, placements
    out/ch00.s ch00.bin ...   per channel: assembly and binary (isa_codec stream format)
    out/host.s host.bin       the host stream

The directory is built under a temporary name beside the target and renamed into place, so a
failure never leaves half-written output. Reading prefers the .bin files (the .s files are for
people); every error is a one-line `StreamsError` naming the file.
"""

from __future__ import annotations

import json
import os
from dataclasses import astuple, fields
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from .atomic import name_path, write_dir_atomically  # noqa: F401  (write_dir_atomically: re-exported)
from .isa import ISA, ISA_VERSION
from .isa_asm import format_stream
from .isa_codec import (
    HEADER,
    HEADER_BYTES,
    MAGIC,
    RECORD_BYTES,
    bad_record,
    encode_records,
    isa_version_tuple,
    read_header,
)
from .readers import parse_json, read_text
from .record_stream import RecordStream, first_problems
from .streams import Placement, ProgramDigest, StreamSet

MANIFEST = "manifest.json"
FORMAT = "pimsat-streams"
FORMAT_VERSION = 1
PLACEMENT_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Placement))
_RESERVED = (
    "format",
    "format_version",
    "hardware",
    "isa_version",
    "symbols",
    "channels",
    "files",
    "placement_fields",
    "placements",
)
_ALLOWED = {"channel": ("channel", "any"), "host": ("host", "any")}


class StreamsError(ValueError):
    """A stream directory that cannot be written or read; one line, naming the file."""


def channel_stem(i: int, n: int) -> str:
    return f"ch{i:0{max(2, len(str(n - 1)))}d}"


def _check_streams(ss: StreamSet) -> None:
    for label, kind, stream in [
        *((f"channel {i}", "channel", s) for i, s in enumerate(ss.channels)),
        ("host", "host", ss.host),
    ]:
        for k, ins in enumerate(stream):
            if ins.spec.stream not in _ALLOWED[kind]:
                raise StreamsError(
                    f"{label} stream, instruction {k}: {ins.op} is a {ins.spec.stream}-stream instruction"
                )


def _manifest_text(m: dict[str, Any]) -> str:
    """JSON with one top-level key per line and each placement on one line."""
    items = []
    for k, v in m.items():
        if k == "placements" and v:
            body = ",\n".join("  " + json.dumps(p, separators=(",", ":")) for p in v)
            items.append(f" {json.dumps(k)}: [\n{body}\n ]")
        else:
            items.append(f" {json.dumps(k)}: {json.dumps(v, sort_keys=True)}")
    return "{\n" + ",\n".join(items) + "\n}\n"


def _write_file(path: Path, data: bytes | str) -> None:
    mode = "wb" if isinstance(data, bytes) else "w"
    try:
        with open(path, mode) as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:  # a full disk's write() names no file: name it
        name_path(e, path)
        raise


#: instructions formatted and encoded at a time: a stream is written a window at a time, so the
#: writer's memory does not grow with the program (a LazyStream builds its parts as it goes)
WRITE_WINDOW = 1 << 16


def _write_stream(asm: Path, binary: Path, stream, header: str, digest: ProgramDigest) -> None:
    """The stream's assembly and binary files, written together in one pass over the stream (a
    lazy stream builds its instructions once), WRITE_WINDOW instructions at a time; the binary
    encoding is fed to `digest` as it goes (`ProgramDigest.add` of the whole: its length first)."""
    head = HEADER.pack(MAGIC, *isa_version_tuple(), len(stream))
    digest.begin(len(head) + len(stream) * RECORD_BYTES)
    digest.update(head)
    path = asm
    try:
        with open(asm, "w") as fa, open(binary, "wb") as fb:
            fa.write(format_stream([], header=header))
            path = binary
            fb.write(head)
            it = iter(stream)
            while part := list(islice(it, WRITE_WINDOW)):
                path = asm
                fa.write(format_stream(part))
                path = binary
                data = encode_records(part).tobytes()
                digest.update(data)
                fb.write(data)
            path = asm
            fa.flush()
            os.fsync(fa.fileno())
            path = binary
            fb.flush()
            os.fsync(fb.fileno())
    except OSError as e:  # a full disk's write() names no file: name it
        name_path(e, path)
        raise


def _build(ss: StreamSet, tmp: Path, extra: dict[str, Any]) -> None:
    n = len(ss.channels)
    entries = []
    named = [(channel_stem(i, n), s, f"channel {i}") for i, s in enumerate(ss.channels)]
    digest = ProgramDigest(ss)
    for stem, stream, label in [*named, ("host", ss.host, "host")]:
        header = f"pimsat ISA {ss.isa_version} -- {ss.hardware} -- {label} stream, {len(stream)} instructions"
        _write_stream(tmp / f"{stem}.s", tmp / f"{stem}.bin", stream, header, digest)
        entries.append({"asm": f"{stem}.s", "bin": f"{stem}.bin", "instructions": len(stream)})
    extra = {"program_sha256": digest.hexdigest(), **extra}
    manifest: dict[str, Any] = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "hardware": ss.hardware,
        "isa_version": ss.isa_version,
        "symbols": list(ss.symbols),
        "channels": n,
        "files": {"channels": entries[:-1], "host": entries[-1]},
        "placement_fields": list(PLACEMENT_FIELDS),
        "placements": [list(astuple(p)) for p in ss.placements],
    }
    manifest.update(extra)
    _write_file(tmp / MANIFEST, _manifest_text(manifest))


def write_streams(ss: StreamSet, out_dir: str | Path, extra_manifest: dict[str, Any] | None = None) -> Path:
    """Write `ss` to `out_dir` (replacing a previous stream directory there) atomically."""
    out = Path(out_dir)
    extra = dict(extra_manifest or {})
    clash = sorted(set(extra) & set(_RESERVED))
    if clash:
        raise StreamsError(f"{out / MANIFEST}: extra manifest keys {', '.join(clash)} are reserved")
    try:
        json.dumps(extra)
    except (TypeError, ValueError) as e:
        raise StreamsError(f"{out / MANIFEST}: extra manifest is not JSON: {e}") from None
    _check_streams(ss)
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MANIFEST).exists())):
        raise StreamsError(f"{out}: exists and is not a stream directory; refusing to replace it")
    return write_dir_atomically(out, lambda tmp: _build(ss, tmp, extra))


# --- reading -----------------------------------------------------------------------------
#: Highest issue stamp read: the simulator's clocks are 64-bit, so a stamp near 2^64 would wrap.
MAX_STAMP = (1 << 62) - 1


def _bad(path: Path, field: str, want: str, got: Any) -> StreamsError:
    shown = repr(got) if len(repr(got)) < 40 else f"a {type(got).__name__}"
    return StreamsError(f"{path}: {field}: must be {want}, got {shown}")


def _is_int(v: Any, lo: int = 0) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= lo


def _check_entry(path: Path, field: str, e: Any) -> None:
    if not isinstance(e, dict):
        raise _bad(path, field, "an object with asm, bin and instructions", e)
    for key in ("asm", "bin"):
        name = e.get(key)
        if not isinstance(name, str) or not name or "/" in name or "\\" in name or name in (".", ".."):
            raise _bad(path, f"{field}.{key}", "a file name in the stream folder", name)
    if not _is_int(e.get("instructions")):
        raise _bad(path, f"{field}.instructions", "a whole number >= 0", e.get("instructions"))


def _check_manifest(path: Path, m: dict[str, Any]) -> None:
    """The type of every field the reader and `pimsat simulate` use: one line naming the field."""
    for key in ("hardware", "isa_version"):
        if not isinstance(m[key], str):
            raise _bad(path, key, "a string", m[key])
    if not isinstance(m["symbols"], list) or not all(isinstance(x, str) for x in m["symbols"]):
        raise _bad(path, "symbols", "a list of strings", m["symbols"])
    if not _is_int(m["channels"]):
        raise _bad(path, "channels", "a whole number >= 0", m["channels"])
    files = m["files"]
    if not isinstance(files, dict) or not isinstance(files.get("channels"), list) or "host" not in files:
        raise _bad(path, "files", "an object with a channels list and a host entry", files)
    if len(files["channels"]) != m["channels"]:
        raise StreamsError(f"{path}: files.channels: {len(files['channels'])} entries, channels says {m['channels']}")
    for i, e in enumerate(files["channels"]):
        _check_entry(path, f"files.channels[{i}]", e)
    _check_entry(path, "files.host", files["host"])
    order = m["placement_fields"]
    if (
        not isinstance(order, list)
        or sorted(map(str, order)) != sorted(PLACEMENT_FIELDS)
        or len(set(order)) != len(order)
    ):
        raise _bad(path, "placement_fields", f"the fields {', '.join(PLACEMENT_FIELDS)}", order)
    if not isinstance(m["placements"], list):
        raise _bad(path, "placements", "a list", m["placements"])
    for i, p in enumerate(m["placements"]):
        if not isinstance(p, list) or len(p) != len(order):
            raise _bad(path, f"placements[{i}]", f"a list of {len(order)} values", p)


def _load_manifest(d: Path) -> dict[str, Any]:
    path = d / MANIFEST
    m = parse_json(read_text(path, StreamsError), str(path), StreamsError)  # no size limit: no aliases in JSON
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise StreamsError(f"{path}: format: not a pimsat stream manifest (format must be {FORMAT!r})")
    if m.get("format_version") != FORMAT_VERSION:
        raise StreamsError(f"{path}: format_version: {m.get('format_version')!r}, expected {FORMAT_VERSION}")
    for key in _RESERVED:
        if key not in m:
            raise StreamsError(f"{path}: {key}: missing")
    _check_manifest(path, m)
    if m["isa_version"].split(".")[0] != ISA_VERSION.split(".")[0]:
        raise StreamsError(f"{path}: isa_version: {m['isa_version']}; this build reads {ISA_VERSION}")
    return m


#: ISA opcode byte -> may it appear in a channel / host stream
_KIND_OK = {kind: np.zeros(256, dtype=bool) for kind in _ALLOWED}
for _op in ISA.ops:
    for _kind, _ok in _ALLOWED.items():
        _KIND_OK[_kind][_op.opcode] = _op.stream in _ok


def _check_records(path: Path, stream: RecordStream, kind: str, expected: int) -> None:
    """One pass over the records, a window at a time; the first problem in the order a reader
    meets them: a stamp beyond the clock, a malformed record, the count, a misplaced instruction."""
    late = bad = misplaced = None
    for a, rec in stream.windows():
        k_late, k_bad, k_wrong = first_problems(rec, _KIND_OK[kind], MAX_STAMP)
        if late is None and k_late >= 0:
            late = (a + k_late, int(rec["cycle"][k_late]))
        if bad is None and k_bad >= 0:
            bad = a + k_bad
            bad_error = bad_record(rec, k_bad, a)
        if misplaced is None and bad is None and k_wrong >= 0:
            misplaced = a + k_wrong
        if late is not None and bad is not None:
            break
    if late is not None:
        raise StreamsError(
            f"{path}: instruction {late[0]}: cycle stamp {late[1]} beyond {MAX_STAMP} (the simulator's 64-bit clock)"
        )
    if bad is not None:
        raise StreamsError(f"{path}: {bad_error}")
    if len(stream) != expected:
        raise StreamsError(f"{path}: {len(stream)} instructions, manifest says {expected}")
    if misplaced is not None:
        ins = stream[misplaced]
        raise StreamsError(f"{path}: instruction {misplaced}: {ins.op} is a {ins.spec.stream}-stream instruction")


def _open_binary(path: Path) -> RecordStream:
    with open(path, "rb") as f:
        head = f.read(HEADER_BYTES)
        size = os.fstat(f.fileno()).st_size
    _, _, count = read_header(head, size)
    return RecordStream(path=path, offset=HEADER_BYTES, count=count)


def _read_stream(d: Path, entry: dict[str, Any], kind: str) -> RecordStream:
    """A channel or host stream as its records: from the .bin file, read a window at a time
    when simulated, or assembled from the .s file (vectorised; asm_records)."""
    try:
        bin_path, asm_path, expected = d / entry["bin"], d / entry["asm"], entry["instructions"]
    except (KeyError, TypeError):
        raise StreamsError(f"{d / MANIFEST}: bad file entry {entry!r}") from None
    path = bin_path if bin_path.exists() else asm_path
    try:
        if path is bin_path:
            stream = _open_binary(bin_path)
        else:
            from .asm_records import parse_records  # (its compiled assembler: loaded for .s files only)

            stream = RecordStream(parse_records(asm_path, lambda p: read_text(p, StreamsError)))
    except OSError as e:
        raise StreamsError(f"{path}: cannot read: {e.strerror}") from None
    except StreamsError:
        raise
    except ValueError as e:
        msg = str(e)
        raise StreamsError(msg if msg.startswith(str(path)) else f"{path}: {msg}") from None
    _check_records(path, stream, kind, expected)
    return stream


def read_streams(in_dir: str | Path) -> tuple[StreamSet, dict[str, Any]]:
    d = Path(in_dir)
    m = _load_manifest(d)
    channels = [_read_stream(d, e, "channel") for e in m["files"]["channels"]]
    host = list(_read_stream(d, m["files"]["host"], "host"))  # the host runner reads instructions
    order = m["placement_fields"]
    try:
        placements = [Placement(**dict(zip(order, p, strict=True))) for p in m["placements"]]
    except (TypeError, ValueError) as e:
        raise StreamsError(f"{d / MANIFEST}: bad placement: {e}") from None
    ss = StreamSet(m["hardware"], m["isa_version"], list(m["symbols"]), channels, host, placements)
    return ss, m
