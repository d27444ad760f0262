"""Benchmark instances: a program (by name and settings, never weights) + a hardware preset.

An instance file is YAML (or JSON):

    name: gemv-4096-hbm2-64ch
    tier: micro
    program: {kind: gemv, n: 4096, k: 4096, batch: 1}
    hardware: {preset: hbm2-pim, set: ["organization.channels=64"]}
    seed: 0

program.kind is `gemv` (n, k, batch, dtype, bias), `attention` (heads, kv_heads, head_dim,
context, batch), `model` (preset or config, batch, context, layers, embed, lm_head) or `pt2`
(path of a torch.export archive, relative to the instance file; position; inputs, an .npz of the
step's inputs). A `.pt2` file given where an instance is expected is an instance of kind pt2
itself (hardware: the default preset). Values for functional runs: :meth:`Instance.values` (the
seeded generator's; for pt2 the archive's weights and, with `inputs`, the step's inputs), which
the pipeline's simulate stage takes (pipeline.simulate_program).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

import ir
from hwmodel import Hardware, HardwareError, load_hardware
from hwmodel.loader import load_validated, one_line


class InstanceError(ValueError):
    """A malformed or inconsistent instance; the message is one line naming file and field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProgramSpec(_Strict):
    kind: Literal["gemv", "attention", "model", "pt2"]
    # gemv
    n: int | None = Field(default=None, ge=1)
    k: int | None = Field(default=None, ge=1)
    bias: bool = False
    # attention
    heads: int | None = Field(default=None, ge=1)
    kv_heads: int | None = Field(default=None, ge=1)
    head_dim: int | None = Field(default=None, ge=1)
    # model
    preset: str | None = None
    config: dict[str, Any] | None = None
    layers: int | None = Field(default=None, ge=1)
    embed: bool = True
    lm_head: bool = True
    # pt2
    path: str | None = None
    position: int | None = Field(default=None, ge=0)
    inputs: str | None = None  # .npz of the exported graph's user inputs for a functional run
    # common
    batch: int = Field(default=1, ge=1, le=1024)
    context: int = Field(default=0, ge=0, le=1 << 20)
    dtype: Literal["fp16", "bf16"] = "fp16"

    @model_validator(mode="after")
    def _fields_for_kind(self) -> ProgramSpec:
        need = {"gemv": ("n", "k"), "attention": ("heads", "head_dim"), "model": (), "pt2": ("path",)}[self.kind]
        for f in need:
            if getattr(self, f) is None:
                raise ValueError(f"{f} is required for kind {self.kind}")
        if self.kind == "model" and (self.preset is None) == (self.config is None):
            raise ValueError("give exactly one of preset or config for kind model")
        if self.kind == "model" and self.preset is not None and self.preset not in ir.PRESETS:
            raise ValueError(f"unknown model preset {self.preset!r} (presets: {', '.join(sorted(ir.PRESETS))})")
        return self


class HardwareSpec(_Strict):
    preset: str = "hbm2-pim"
    set: list[str] = Field(default_factory=list)


class Instance(_Strict):
    name: str
    tier: str = "adhoc"
    description: str = ""
    program: ProgramSpec
    hardware: HardwareSpec = Field(default_factory=HardwareSpec)
    seed: int = Field(default=0, ge=0)  # numpy's generators take no negative seed
    _source: str = PrivateAttr(default="<instance>")
    _imported: Any = PrivateAttr(default=None)

    def file(self, name: str) -> Path:
        """A path the instance names, relative to the instance file."""
        path = Path(name)
        if not path.is_absolute() and self._source != "<instance>" and Path(self._source).suffix != ".pt2":
            path = Path(self._source).parent / path
        return path

    def imported(self):
        """The ir.pt2.Imported of a pt2 instance (imported once)."""
        from ir.pt2 import import_pt2

        if self._imported is None:
            self._imported = import_pt2(self.file(self.program.path), position=self.program.position, name=self.name)
        return self._imported

    def values(self, program: ir.Program) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """(inputs, state) of a functional run of ``program`` (this instance's). The seeded
        generator's (seed), except for kind pt2: the archive's own weights (and static caches),
        with the step's inputs from ``program.inputs`` (an .npz of the exported graph's user inputs,
        as tools/make_pt2_fixtures.py writes them) or, without it, the seeded generator's."""
        inputs, state = ir.generate_inputs(program, seed=self.seed), ir.generate_state(program, seed=self.seed)
        if self.program.kind != "pt2":
            return inputs, state
        imp = self.imported()
        if self.program.inputs is not None:
            path = self.file(self.program.inputs)
            try:
                with np.load(path) as step:
                    return imp.step(dict(step))
            except (OSError, ValueError) as e:
                raise InstanceError(f"{path}: program.inputs: not an .npz of the step's inputs ({e})") from None
        return inputs, {**state, **imp.weights, **imp.step_state_static()}

    def build_program(self) -> ir.Program:
        p = self.program
        if p.kind == "pt2":
            return self.imported().program
        if p.kind == "gemv":
            return ir.gemv_program(p.n, p.k, batch=p.batch, dtype=p.dtype, bias=p.bias)
        if p.kind == "attention":
            return ir.attention_program(
                p.heads, p.kv_heads or p.heads, p.head_dim, p.context, batch=p.batch, dtype=p.dtype
            )
        cfg = ir.PRESETS[p.preset] if p.preset else ir.from_hf_config(p.config)
        return ir.build_decode_step(
            cfg, batch=p.batch, context=p.context, layers=p.layers, embed=p.embed, lm_head=p.lm_head, name=self.name
        )

    def build_hardware(
        self,
        extra: list[str] | tuple[str, ...] = (),
        preset: str | None = None,
        extra_labels: list[str] | tuple[str, ...] | None = None,
    ) -> Hardware:
        """The instance's hardware with `extra` overrides after its own; a failing override is
        blamed on its label (default `--set ITEM`; a sweep names its `--axis`)."""
        sets = list(self.hardware.set) + list(extra)
        labels = [f"{self._source}: hardware.set[{i}] ({s})" for i, s in enumerate(self.hardware.set)]
        extra_labels = [f"--set {s}" for s in extra] if extra_labels is None else list(extra_labels)
        return load_hardware(preset or self.hardware.preset, sets, labels + extra_labels)


def load_instance(path: str | Path) -> Instance:
    path = Path(path)
    if path.suffix == ".pt2":
        data = {"name": path.stem, "program": {"kind": "pt2", "path": str(path)}}
        inst = Instance.model_validate(data)
    else:
        inst = load_validated(path, Instance, InstanceError)
    inst._source = str(path)
    try:
        inst.build_program()
    except ValidationError as e:  # the model config's own fields (ir.ModelConfig)
        raise InstanceError(one_line(str(path), e, "program.config")) from None
    except ir.IRError as e:
        msg = str(e)
        if msg.startswith(f"{inst.program.path}: ") or msg.startswith(f"{path}: "):  # the .pt2 frontend names its file
            raise InstanceError(msg) from None
        if msg.startswith("config: "):  # from_hf_config: "config: FIELD: reason"
            raise InstanceError(f"{path}: program.{msg}".replace("config: ", "config.", 1)) from None
        raise InstanceError(f"{path}: program: {msg}") from None
    except KeyError as e:
        raise InstanceError(f"{path}: program.config.{e.args[0]}: missing") from None
    except (TypeError, ValueError) as e:
        raise InstanceError(f"{path}: program.config: {e}") from None
    try:
        inst.build_hardware()
    except HardwareError as e:
        msg = str(e)
        raise InstanceError(msg if msg.startswith(f"{path}:") else f"{path}: hardware: {msg}") from None
    return inst


def instance_files(root: str | Path) -> list[Path]:
    """The instance file itself, or every *.yaml / *.json below a folder (error if none)."""
    root = Path(root)
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise InstanceError(f"{root}: no such instance file or folder")
    files = sorted(p for p in root.rglob("*") if p.suffix in (".yaml", ".yml", ".json") and p.is_file())
    if not files:
        raise InstanceError(f"{root}: no instance files (*.yaml, *.json) in this folder")
    return files
