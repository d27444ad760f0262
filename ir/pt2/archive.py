"""A torch-free reader of ``torch.export.save`` archives (torch >= 2.9), with zipfile, json and numpy.

Layout (under one root folder, the archive's name): ``archive_format`` = ``pt2``, ``byteorder``,
``models/<model>.json`` (the exported program: schema major 8), and per kind of payload
(``weights``, ``constants``) a ``data/<kind>/<model>_<kind>_config.json`` that maps each
fully qualified name to the file holding its storage, raw little-endian bytes (torch >= 2.9),
with its dtype, sizes, strides and storage offset. A file may hold the storage of several
tensors (views of one storage are stored once).

Refused, each with one line naming the reason (:class:`ArchiveError`): not a zip or no
``archive_format``, a schema major other than 8, the old layout (torch <= 2.8: weights pickled in
``data/weights/<model>.pt``), pickled payloads (``use_pickle``: tensor subclasses, e.g. quantised
weights), dtypes numpy cannot hold exactly (quantised, float8, complex), non-strided layouts and
big-endian archives. Unknown keys are ignored. ``data/sample_inputs`` (a pickle) is never read.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ir.errors import IRError

SCHEMA_MAJOR = 8
STRIDED = 7  # torch._export.serde.schema.Layout.Strided

#: torch.export schema ScalarType -> numpy storage dtype (bfloat16 is read as its uint16 bits).
NUMPY_DTYPES: dict[int, np.dtype] = {
    1: np.dtype("u1"),  # BYTE
    2: np.dtype("i1"),  # CHAR
    3: np.dtype("<i2"),  # SHORT
    4: np.dtype("<i4"),  # INT
    5: np.dtype("<i8"),  # LONG
    6: np.dtype("<f2"),  # HALF
    7: np.dtype("<f4"),  # FLOAT
    8: np.dtype("<f8"),  # DOUBLE
    12: np.dtype("?"),  # BOOL
    13: np.dtype("<u2"),  # BFLOAT16 (bits)
}
DTYPE_NAMES = {1: "uint8", 2: "int8", 3: "int16", 4: "int32", 5: "int64", 6: "float16", 7: "float32"}
DTYPE_NAMES |= {8: "float64", 12: "bool", 13: "bfloat16", 9: "complex32", 10: "complex64", 11: "complex128"}
DTYPE_NAMES |= {28: "uint16", 29: "float8_e4m3fn", 30: "float8_e5m2", 31: "float8_e4m3fnuz"}
DTYPE_NAMES |= {32: "float8_e5m2fnuz", 33: "float8_e8m0fnu", 34: "uint32", 35: "uint64"}
BFLOAT16 = 13


class ArchiveError(IRError):
    """A .pt2 archive pimsat does not read; the message is one line: file and reason."""


@dataclass(frozen=True)
class TensorMeta:
    dtype: int
    sizes: tuple[int, ...]
    strides: tuple[int, ...] = ()
    offset: int = 0
    layout: int = STRIDED

    @property
    def dtype_name(self) -> str:
        return DTYPE_NAMES.get(self.dtype, f"dtype #{self.dtype}")


def _int(v: Any, what: str, src: str) -> int:
    if isinstance(v, dict) and "as_int" in v:
        return int(v["as_int"])
    raise ArchiveError(f"{src}: {what}: {v!r} is not a static integer (dynamic shapes are not supported)")


def tensor_meta(d: dict[str, Any], src: str) -> TensorMeta:
    return TensorMeta(
        dtype=int(d["dtype"]),
        sizes=tuple(_int(s, "sizes", src) for s in d["sizes"]),
        strides=tuple(_int(s, "strides", src) for s in d.get("strides", [])),
        offset=_int(d.get("storage_offset", {"as_int": 0}), "storage_offset", src),
        layout=int(d.get("layout", STRIDED)),
    )


@dataclass
class Archive:
    """One exported program: its graph (``model``, the JSON of models/<model>.json) and payloads."""

    path: str
    model: dict[str, Any]
    weights: dict[str, np.ndarray] = field(default_factory=dict)  # fully qualified name -> array
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    bf16: set[str] = field(default_factory=set)  # names whose values were bfloat16 (held as float32)

    @property
    def graph(self) -> dict[str, Any]:
        return self.model["graph_module"]["graph"]

    @property
    def signature(self) -> dict[str, Any]:
        return self.model["graph_module"]["signature"]


def _decode(raw: bytes, meta: TensorMeta, where: str) -> np.ndarray:
    if meta.layout != STRIDED:
        raise ArchiveError(
            f"{where}: layout #{meta.layout} is not strided (sparse or mkldnn tensors are not supported)"
        )
    if meta.dtype not in NUMPY_DTYPES:
        raise ArchiveError(f"{where}: dtype {meta.dtype_name} is not supported (quantised, float8 or complex)")
    dt = NUMPY_DTYPES[meta.dtype]
    if len(raw) % dt.itemsize:
        raise ArchiveError(f"{where}: {len(raw)} bytes is not a whole number of {meta.dtype_name} elements")
    storage = np.frombuffer(raw, dtype=dt)
    strides = meta.strides or tuple(int(np.prod(meta.sizes[i + 1 :])) for i in range(len(meta.sizes)))
    contiguous = tuple(int(np.prod(meta.sizes[i + 1 :])) for i in range(len(meta.sizes)))
    if any(n == 0 for n in meta.sizes):
        arr = np.zeros(meta.sizes, dtype=dt)
    elif strides == contiguous and meta.offset == 0 and storage.size == int(np.prod(meta.sizes)):
        arr = storage.reshape(meta.sizes)  # the whole storage, in order: no copy (read-only)
    else:
        last = meta.offset + sum((n - 1) * s for n, s in zip(meta.sizes, strides))
        if meta.offset < 0 or min(strides, default=0) < 0 or last >= storage.size:
            raise ArchiveError(f"{where}: sizes/strides/offset reach past the {storage.size} stored elements")
        view = np.lib.stride_tricks.as_strided(
            storage[meta.offset :], shape=meta.sizes, strides=[s * dt.itemsize for s in strides], writeable=False
        )
        arr = np.ascontiguousarray(view)
    if meta.dtype == BFLOAT16:
        arr = (arr.astype(np.uint32) << np.uint32(16)).view(np.float32)
    return arr


def _payloads(z: zipfile.ZipFile, root: str, kind: str, model: str, src: str, out: Archive) -> dict[str, np.ndarray]:
    cfg_name = f"{root}data/{kind}/{model}_{kind}_config.json"
    names = set(z.namelist())
    if cfg_name not in names:
        if f"{root}data/{kind}/{model}.pt" in names:
            raise ArchiveError(
                f"{src}: old archive layout: {kind} pickled in data/{kind}/{model}.pt (torch <= 2.8); "
                "re-export with torch >= 2.9"
            )
        return {}
    config = json.loads(z.read(cfg_name)).get("config", {})
    result: dict[str, np.ndarray] = {}
    for fqn, entry in config.items():
        where = f"{src}: {kind} '{fqn}'"
        if entry.get("use_pickle"):
            raise ArchiveError(
                f"{where}: pickled payload (a tensor subclass, e.g. a quantised weight) is not supported"
            )
        meta = tensor_meta(entry["tensor_meta"], where)
        file = f"{root}data/{kind}/{entry['path_name']}"
        if file not in names:
            raise ArchiveError(f"{where}: payload file data/{kind}/{entry['path_name']} is missing")
        result[fqn] = _decode(z.read(file), meta, where)
        if meta.dtype == BFLOAT16:
            out.bf16.add(fqn)
    return result


def read_archive(path: str | Path, model: str = "model") -> Archive:
    """Read ``models/<model>.json`` and every weight and constant of a .pt2 archive."""
    src = str(path)
    try:
        z = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as e:
        raise ArchiveError(f"{src}: not a torch.export archive ({e})") from None
    with z:
        fmt = [n for n in z.namelist() if n.endswith("archive_format") and n.count("/") == 1]
        if not fmt or z.read(fmt[0]).strip() != b"pt2":
            raise ArchiveError(f"{src}: not a torch.export archive (no <root>/archive_format saying pt2)")
        root = fmt[0][: -len("archive_format")]
        order = f"{root}byteorder"
        if order in z.namelist() and z.read(order).strip() != b"little":
            raise ArchiveError(f"{src}: byteorder {z.read(order).strip().decode()!r}: only little-endian is supported")
        mname = f"{root}models/{model}.json"
        if mname not in z.namelist():
            have = sorted(n[len(root) :] for n in z.namelist() if n.startswith(f"{root}models/"))
            raise ArchiveError(f"{src}: no models/{model}.json in the archive (models: {', '.join(have) or 'none'})")
        doc = json.loads(z.read(mname))
        version = doc.get("schema_version", {})
        major = version.get("major") if isinstance(version, dict) else None
        if major != SCHEMA_MAJOR:
            raise ArchiveError(
                f"{src}: schema_version major {major} is not supported (pimsat reads major {SCHEMA_MAJOR}, "
                "written by torch 2.6 and later)"
            )
        out = Archive(path=src, model=doc)
        out.weights = _payloads(z, root, "weights", model, src, out)
        out.constants = _payloads(z, root, "constants", model, src, out)
    return out


__all__ = ["Archive", "ArchiveError", "TensorMeta", "read_archive", "tensor_meta", "SCHEMA_MAJOR"]
