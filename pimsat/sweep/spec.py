"""What a sweep runs: axes over hardware and program fields, the points they span, every point
validated before any work starts.

An axis is `PATH=V1,V2,...`:

- `hw`: the hardware preset (or YAML file), as `pimsat solve --hw`;
- `program.FIELD` (`program.batch`, `program.context`, `program.preset`, ...): a field of the
  instance's program (pimsat.instance.ProgramSpec), validated by it;
- anything else: a hardware field exactly as `pimsat solve --set PATH=VALUE` reaches it
  (`pim.lanes`, `organization.channels`, `timing.params.tRCDRD`), applied and checked by
  hwmodel.loader's overrides against the hardware schema.

Values are YAML scalars, as `--set` reads them. Axes span a product (first axis slowest) or, with
`zip`, advance together. A bad path or value is a SweepError naming the axis and value.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

import ir
from hwmodel import Hardware, HardwareError
from hwmodel.loader import apply_overrides, load_validated, one_line
from solver.problem import Method

from .. import __version__
from ..instance import Instance, InstanceError, load_instance

PRESET_AXIS = "hw"
PROGRAM_PREFIX = "program."


class SweepError(ValueError):
    """A sweep that cannot start; the message is one line naming the option, axis or file."""


class AxisKind(StrEnum):
    HARDWARE = "hardware"  # a field `--set` reaches
    PROGRAM = "program"  # a field of the instance's program
    PRESET = "preset"  # the hardware preset itself


@dataclass(frozen=True)
class Axis:
    path: str
    values: tuple[str, ...]  # as text, the way `--set` reads a value (YAML)

    @property
    def kind(self) -> AxisKind:
        if self.path == PRESET_AXIS:
            return AxisKind.PRESET
        return AxisKind.PROGRAM if self.path.startswith(PROGRAM_PREFIX) else AxisKind.HARDWARE

    @classmethod
    def parse(cls, text: str) -> Axis:
        """`pim.lanes=8,16,32`."""
        path, sep, values = text.partition("=")
        path = path.strip()
        items = tuple(v.strip() for v in values.split(","))
        if not sep or not path or any(not v for v in items):
            raise SweepError(f"--axis {text}: expected PATH=V1,V2,... e.g. pim.lanes=8,16,32")
        return cls(path, items)

    def label(self, value: str) -> str:
        return f"--axis {self.path}={value}"


@dataclass(frozen=True)
class PointOptions:
    """What every point's pipeline runs with (all of it affects results, so all of it is keyed)."""

    methods: tuple[str, ...]
    functional: bool = False  # False: timing-only; True: functional where it fits (FUNCTIONAL_LIMIT_BYTES)
    time_limit: float = 60.0
    deterministic_time: float | None = None
    cp_workers: int = 2
    seed: int = 0
    groups: int = 4

    def keyed(self) -> dict[str, Any]:
        return {
            "functional": self.functional,
            "time_limit": self.time_limit,
            "deterministic_time": self.deterministic_time,
            "cp_workers": self.cp_workers,
            "seed": self.seed,
            "groups": self.groups,
        }


@dataclass(frozen=True)
class Point:
    """One instance with one value per axis: everything a worker needs, as plain data."""

    index: int
    instance: dict[str, Any]  # Instance.model_dump(mode="json"), the program axes applied
    source: str  # the instance file (paths inside it are relative to it)
    preset: str | None
    sets: tuple[str, ...]  # hardware overrides: the sweep's --set, then the hardware axes'
    coords: tuple[tuple[str, str], ...]  # (axis path, value) in axis order
    hardware: str  # the resolved hardware's name
    total_lanes: int  # cost proxy: channels x PIM units per channel x lanes
    options: PointOptions
    keys: tuple[tuple[str, str], ...] = field(default=())  # (method, result key)
    resolved: str = ""  # the hardware built and checked here, as JSON (what the result key hashes)

    def key(self, method: str) -> str:
        return dict(self.keys)[method]

    def load_hardware(self) -> Hardware:
        """The point's hardware: validated again from the JSON built when the sweep started (no
        preset file read in the worker), or built from the instance and overrides."""
        if self.resolved:
            return Hardware.model_validate_json(self.resolved)
        return self.load_instance().build_hardware(list(self.sets), self.preset)

    def load_instance(self) -> Instance:
        inst = Instance.model_validate(self.instance)
        inst._source = self.source
        return inst


class SweepFile(BaseModel):
    """A sweep as YAML: `pimsat sweep --file SWEEP.yaml` (instances relative to the file)."""

    model_config = ConfigDict(extra="forbid")
    instances: list[str] = Field(default_factory=list)
    axes: dict[str, list[Any]] = Field(default_factory=dict)
    methods: list[Method] | None = None
    zip: bool = False
    timing_only: bool = True
    time_limit: float | None = Field(default=None, gt=0)
    deterministic_time: float | None = Field(default=None, ge=0)
    hw: str | None = None
    set: list[str] = Field(default_factory=list)


def read_sweep_file(path: str | Path) -> tuple[SweepFile, list[Axis], list[Path]]:
    path = Path(path)
    spec = load_validated(path, SweepFile, SweepError)
    axes = []
    for name, values in spec.axes.items():
        if not values:
            raise SweepError(f"{path}: axes.{name}: no values")
        axes.append(Axis(name, tuple(v if isinstance(v, str) else json.dumps(v) for v in values)))
    instances = [p if Path(p).is_absolute() else path.parent / p for p in map(Path, spec.instances)]
    return spec, axes, instances


def combinations(axes: list[Axis], zipped: bool) -> list[tuple[str, ...]]:
    if not axes:
        return [()]
    if zipped:
        lengths = {len(a.values) for a in axes}
        if len(lengths) > 1:
            sizes = ", ".join(f"{a.path} has {len(a.values)}" for a in axes)
            raise SweepError(f"--zip: the axes must have as many values each ({sizes})")
        return list(zip(*(a.values for a in axes)))
    return list(itertools.product(*(a.values for a in axes)))


def _with_program(inst: Instance, items: list[tuple[Axis, str]]) -> Instance:
    """The instance with its program fields set (validated by ProgramSpec, built once)."""
    if not items:
        return inst
    data = inst.model_dump(mode="json")
    try:
        data["program"] = apply_overrides(
            {"program": data["program"]},
            [f"{a.path}={v}" for a, v in items],
            "the instance",
            [a.label(v) for a, v in items],
        )["program"]
    except HardwareError as e:
        raise SweepError(str(e)) from None
    label = ", ".join(a.label(v) for a, v in items)
    try:
        out = Instance.model_validate(data)
    except ValidationError as e:
        raise SweepError(one_line(label, e)) from None
    out._source = inst._source
    try:
        out.build_program()
    except (ir.IRError, ValidationError, KeyError, TypeError, ValueError) as e:
        raise SweepError(f"{label}: program: {e}") from None
    return out


def _hardware(inst: Instance, preset: str | None, sets: list[str], axes: list[tuple[Axis, str]]) -> Hardware:
    labels = [f"--set {s}" for s in sets] + [a.label(v) for a, v in axes]
    try:
        return inst.build_hardware(sets + [f"{a.path}={v}" for a, v in axes], preset, labels)
    except HardwareError as e:
        msg = str(e)
        if preset is not None and msg.startswith("unknown hardware preset"):
            msg = f"--axis {PRESET_AXIS}={preset}: {msg}"
        raise SweepError(msg) from None


def _digest(inst: Instance) -> str | None:
    """The bytes an instance reads besides its own fields (a pt2 archive and its inputs)."""
    if inst.program.kind != "pt2":
        return None
    h = hashlib.sha256()
    for name in (inst.program.path, inst.program.inputs):
        if name is not None:
            h.update(inst.file(name).read_bytes())
    return h.hexdigest()


def result_key(inst: Instance, hw: Hardware, method: str, options: PointOptions) -> str:
    """sha256 of what a result depends on: instance, resolved hardware, method, options, version."""
    what = {
        "instance": inst.model_dump(mode="json"),
        "files": _digest(inst),
        "hardware": json.loads(hw.model_dump_json()),
        "method": method,
        "options": options.keyed(),
        "pimsat": __version__,
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()


def build_points(
    instances: list[str | Path],
    axes: list[Axis],
    options: PointOptions,
    *,
    zipped: bool = False,
    preset: str | None = None,
    sets: list[str] | tuple[str, ...] = (),
) -> list[Point]:
    """Every point, in order (instances, then axis combinations), its hardware and program built
    and checked now: a bad axis fails here, before any point runs."""
    if not instances:
        raise SweepError("no instance given (INSTANCE... or instances: in --file)")
    seen = {}
    for a in axes:
        if a.path in seen:
            raise SweepError(f"--axis {a.path}: given twice")
        seen[a.path] = a
    combos = combinations(axes, zipped)
    points: list[Point] = []
    for path in instances:
        try:
            base = load_instance(path)
        except InstanceError as e:
            raise SweepError(str(e)) from None
        for combo in combos:
            chosen = list(zip(axes, combo))
            inst = _with_program(base, [(a, v) for a, v in chosen if a.kind is AxisKind.PROGRAM])
            point_preset = next((v for a, v in chosen if a.kind is AxisKind.PRESET), preset)
            hw = _hardware(inst, point_preset, list(sets), [(a, v) for a, v in chosen if a.kind is AxisKind.HARDWARE])
            points.append(
                Point(
                    index=len(points),
                    instance=inst.model_dump(mode="json"),
                    source=inst._source,
                    preset=point_preset,
                    sets=tuple(sets) + tuple(f"{a.path}={v}" for a, v in chosen if a.kind is AxisKind.HARDWARE),
                    coords=tuple((a.path, v) for a, v in chosen),
                    hardware=hw.name,
                    total_lanes=hw.total_pus * hw.pim.lanes,
                    options=options,
                    keys=tuple((m, result_key(inst, hw, m, options)) for m in options.methods),
                    resolved=hw.model_dump_json(),
                )
            )
    return points
