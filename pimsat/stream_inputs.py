"""What `pimsat simulate` takes from a stream manifest besides the streams: the hardware, the
program and the seed, each checked with one line naming the manifest and the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from hwmodel import Hardware, HardwareError, load_hardware
from hwmodel.loader import apply_overrides, hardware_from_dict, one_line
from hwmodel.streams_io import MANIFEST, StreamsError


def manifest_inputs(
    streams_dir: str | Path, manifest: dict[str, Any], preset: str | None, sets: list[str]
) -> tuple[Hardware, Any, int]:
    """(hardware, the program or None, the seed); ir is imported only for a program (start-up:
    a stream folder without one simulates without loading the IR)."""
    path = Path(streams_dir) / MANIFEST
    if preset:
        hw = load_hardware(preset, list(sets))
    elif "hardware_spec" in manifest:
        spec = manifest["hardware_spec"]
        if not isinstance(spec, dict):
            raise StreamsError(f"{path}: hardware_spec: must be an object, got a {type(spec).__name__}")
        source = f"{path}: hardware_spec"
        hw = hardware_from_dict(apply_overrides(spec, list(sets), source), source)
    else:
        raise HardwareError(f"{path}: hardware_spec: no hardware recorded; pass --hw")
    program = None
    if "program" in manifest:
        if not isinstance(manifest["program"], dict):
            raise StreamsError(f"{path}: program: must be an object, got a {type(manifest['program']).__name__}")
        import ir

        try:
            program = ir.Program.from_json(json.dumps(manifest["program"]))
        except ValidationError as e:
            raise StreamsError(one_line(str(path), e, "program")) from None
        except ir.IRError as e:
            raise StreamsError(f"{path}: program: {e}") from None
    seed = manifest.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise StreamsError(f"{path}: seed: must be a whole number >= 0, got {seed!r}")
    return hw, program, seed
