"""Rewriting a .pt2 archive the way another torch version, a quantiser or a custom op would have
written it (for the refusal tests)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path


def rewrite(src: Path, dst: Path, edit) -> Path:
    """Copy the archive, passing each entry (name, bytes) through ``edit`` (None drops it)."""
    with zipfile.ZipFile(src) as z, zipfile.ZipFile(dst, "w") as out:
        for info in z.infolist():
            data = edit(info.filename, z.read(info.filename))
            if data is not None:
                out.writestr(info.filename, data)
    return dst


def edit_json(suffix: str, f):
    def edit(name, data):
        if not name.endswith(suffix):
            return data
        doc = json.loads(data)
        f(doc)
        return json.dumps(doc).encode()

    return edit


def node(doc, target_end: str) -> dict:
    return next(n for n in doc["graph_module"]["graph"]["nodes"] if n["target"].endswith(target_end))
