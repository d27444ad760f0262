"""Load a hardware description: a preset name or a YAML file, plus `--set key=value` overrides.

Every failure is a `HardwareError` whose message names the file and the field:
    hwmodel/presets/hbm2-pim.yaml: timing.params.tRCDRD: missing timing parameter tRCDRD
"""

from __future__ import annotations

import copy
import re
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import ValidationError

from .model import DERIVED_PARAMS, Hardware, link_burst_cycles
from .readers import load_file, parse_yaml

T = TypeVar("T")

PRESET_DIR = Path(str(resources.files("hwmodel") / "presets"))
_TABLE_FILE = "_timing_table.yaml"


class HardwareError(ValueError):
    """A hardware description that cannot be used; the message is one line for the user."""


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml") if not p.name.startswith("_"))


def family_timing_table() -> list[dict[str, Any]]:
    # the package's own file: libyaml's parser when PyYAML has it (same data, several times faster)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load((PRESET_DIR / _TABLE_FILE).read_text(), Loader=loader)  # noqa: S506


def family_rows(gb_write_path: str) -> list[dict[str, Any]]:
    """The family's rows that hold on a device with that pim.gb_write_path (a preset's own rows,
    timing.device_rows, come after them)."""
    return [r for r in family_timing_table() if r.get("when") in (None, gb_write_path)]


def _read_yaml(path: Path) -> dict[str, Any]:
    data = load_file(path, HardwareError, kind="yaml")
    if not isinstance(data, dict):
        raise HardwareError(f"{path}: (top level): must be a mapping, not {type(data).__name__}")
    return data


def resolve_source(name_or_path: str) -> Path:
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return path
    candidate = PRESET_DIR / f"{name_or_path}.yaml"
    if not candidate.exists():
        raise HardwareError(f"unknown hardware preset {name_or_path!r} (presets: {', '.join(preset_names())})")
    return candidate


def _parse_value(label: str, text: str) -> Any:
    """An override's value as YAML (a number, a list, a mapping), size-checked like a file."""
    return parse_yaml(text, f"{label}: cannot parse value {text!r}", HardwareError)


def _labels(overrides: list[str], labels: list[str] | None) -> list[str]:
    return list(labels) if labels is not None else [f"--set {item}" for item in overrides]


def apply_overrides(
    data: dict[str, Any], overrides: list[str], source: str, labels: list[str] | None = None
) -> dict[str, Any]:
    """`pim.lanes=32`, `organization.channels=8`, `timing.params.tRCDRD=20`, and a row of the
    timing table by its index: `timing.constraints[12].latency=20` (or `timing.constraints.12...`;
    the indices are those of `pimsat hw PRESET --rows`). `labels`: what to blame for each override
    in a message (default `--set ITEM`)."""
    data = copy.deepcopy(data)
    for item, label in zip(overrides, _labels(overrides, labels), strict=True):
        if "=" not in item:
            raise HardwareError(f"{label}: expected KEY=VALUE, e.g. pim.lanes=32")
        key, text = item.split("=", 1)
        key = re.sub(r"\[(\d+)\]", r".\1", key.strip())
        parts = key.split(".")
        if parts[:2] == ["timing", "constraints"]:
            _with_rows(data)
        node = data
        for depth, part in enumerate(parts[:-1]):
            if isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
                continue
            if not isinstance(node, dict) or part not in node:
                field = ".".join(parts[: depth + 1])
                size = f" (rows 0..{len(node) - 1})" if isinstance(node, list) else ""
                raise HardwareError(f"{label}: {field}: {source} has no field {field}{size}")
            node = node[part]
        leaf = parts[-1]
        if not isinstance(node, dict) or (leaf not in node and leaf not in _ROW_FIELDS):
            known = f" (known: {', '.join(sorted(node))})" if isinstance(node, dict) and len(node) < 40 else ""
            raise HardwareError(f"{label}: {key}: {source} has no field {key}{known}")
        value = _parse_value(label, text)
        if node is data and leaf in _TEXT_FIELDS and isinstance(value, int | float):
            value = text.strip()  # isa_version=1.5: the version as written (1.10 is not 1.1)
        node[leaf] = value
    return data


# top-level text fields an override may give as a bare number
_TEXT_FIELDS = ("name", "isa_version")
# the fields a timing-table row may be given (hwmodel.model.TimingConstraint)
_ROW_FIELDS = ("prev", "next", "scope", "latency", "window", "when")


def _with_rows(data: dict[str, Any]) -> None:
    """The device's timing-table rows written into `data` (as hardware_from_dict adds them), so an
    override can name one by its index: the family's rows, then the device's own
    (`timing.device_rows` of a preset: rules of one device's vendor model that the family's other
    devices do not have, each citing its source)."""
    timing = data.get("timing")
    if not isinstance(timing, dict):
        return
    own = timing.pop("device_rows", None) or []
    if "constraints" not in timing:
        pim = data.get("pim")
        path = pim.get("gb_write_path", "data_bus") if isinstance(pim, dict) else "data_bus"
        timing["constraints"] = [dict(r) for r in family_rows(path)]
    if own:
        timing["constraints"] = [*timing["constraints"], *(dict(r) for r in own)]


def one_line(source: str, err: ValidationError, prefix: str = "") -> str:
    """A pydantic ValidationError as `source: prefix.loc.path: message (and N more)`."""
    errors = err.errors()
    first = errors[0]
    field = ".".join([prefix] * bool(prefix) + [str(p) for p in first["loc"]]) or "(top level)"
    msg = first["msg"].removeprefix("Value error, ")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{source}: {field}: {msg}{more}"


def load_validated(path: Path, model: type[T], error: type[Exception]) -> T:
    """A YAML/JSON file validated as `model`; a file that is no mapping or does not validate is
    one line naming the file and the field, raised as `error`."""
    data = load_file(path, error)
    if not isinstance(data, dict):
        raise error(f"{path}: (top level): must be a mapping, not {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise error(one_line(str(path), e)) from None


def _add_derived_params(data: dict[str, Any], source: str) -> None:
    """Add tLINK to timing.params (malformed fields are left for the model to report)."""
    timing, host, org = (data.get(k) for k in ("timing", "host", "organization"))
    params = timing.get("params") if isinstance(timing, dict) else None
    if not isinstance(params, dict):
        return
    for name in DERIVED_PARAMS:
        if name in params:
            raise HardwareError(
                f"{source}: timing.params.{name}: derived, not a preset parameter "
                "(set host.link_bytes_per_cycle instead)"
            )
    try:
        params["tLINK"] = link_burst_cycles(int(org["burst_bytes"]), float(host["link_bytes_per_cycle"]))
    except (KeyError, TypeError, ValueError, ZeroDivisionError, OverflowError):
        pass


def hardware_from_dict(data: dict[str, Any], source: str = "<hardware>") -> Hardware:
    data = copy.deepcopy(data)
    _with_rows(data)  # the family's rows; those of another pim.gb_write_path than this device's are not its rules
    _add_derived_params(data, source)
    try:
        return Hardware.model_validate(data)
    except ValidationError as e:
        raise HardwareError(one_line(source, e)) from None


def load_hardware(
    name_or_path: str = "hbm2-pim", overrides: list[str] | tuple[str, ...] = (), labels: list[str] | None = None
) -> Hardware:
    """A preset or YAML file with `overrides`; a failure that an override causes is blamed on
    it (its label, default `--set ITEM`), not on the file."""
    path = resolve_source(name_or_path)
    data = _read_yaml(path)
    source = str(path)
    overrides, labels = list(overrides), _labels(list(overrides), labels)
    try:
        return hardware_from_dict(apply_overrides(data, overrides, source, labels), source)
    except HardwareError as e:
        if not overrides or not str(e).startswith(f"{source}:"):
            raise
        # the first prefix of the overrides that fails names the culprit
        for n in range(len(overrides) + 1):
            try:
                hardware_from_dict(apply_overrides(data, overrides[:n], source, labels[:n]), source)
            except HardwareError as first:
                if n == 0:
                    raise first from None
                raise HardwareError(f"{labels[n - 1]}: {str(first).removeprefix(source + ': ')}") from None
        raise
