"""Ops and programs: the op graph of one decode step (or one kernel).

A :class:`Program` is validated when it is constructed (``Program(...)``, ``model_validate``,
``from_json``): see :func:`ir.validate.check_program` for the rules. Invalid programs raise
:class:`~ir.errors.IRError`.

KV caches: a ``kv_append`` op reads a kv-cache tensor ``C`` and produces a new tensor named
``C@<position>`` (role kv_cache, same shape) — the cache after the new token was written. The
two names denote the same storage: hardware updates in place, which is safe because the only
consumer of an appended-to cache version is its ``kv_append`` (enforced). :meth:`Program.storage`
maps any cache version to its root (the resident tensor that state provides).
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import networkx as nx
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ir.errors import IRError
from ir.ops import PIM_CAPABLE, RESIDENT_OPERAND, OpKind
from ir.types import Role, Tensor

_SCALARS = (bool, int, float, str)
_CACHES = ("_op_index", "_topo")  # cached_property values derived from the (frozen) fields


class Op(BaseModel):
    """One operation: ``outputs = kind(inputs; attrs)`` (tensor names, see :mod:`ir.ops`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    kind: OpKind
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = Field(default_factory=dict)

    @field_validator("attrs")
    @classmethod
    def _scalars(cls, v: dict[str, Any]) -> dict[str, Any]:
        for k, x in v.items():
            if not isinstance(x, _SCALARS):
                raise ValueError(f"attrs.{k}: {x!r} is not a JSON scalar (bool, int, float, str)")
        return v

    @property
    def pim_capable(self) -> bool:
        return self.kind in PIM_CAPABLE


def _unwrap(err: ValidationError) -> IRError | None:
    for e in err.errors():
        inner = (e.get("ctx") or {}).get("error")
        if isinstance(inner, IRError):
            return inner
    return None


class Program(BaseModel):
    """A validated op graph with named tensors, program inputs/outputs and free-form meta."""

    model_config = ConfigDict(frozen=True, extra="forbid", ignored_types=(cached_property,))

    name: str
    tensors: dict[str, Tensor]
    ops: list[Op]
    inputs: list[str]
    outputs: list[str]
    meta: dict[str, Any] = Field(default_factory=dict)

    @field_validator("tensors", mode="before")
    @classmethod
    def _tensor_list(cls, v):
        if isinstance(v, (list, tuple)):
            out = {}
            for t in v:
                name = t.name if isinstance(t, Tensor) else t["name"]
                if name in out:
                    raise IRError(f"tensors: duplicate tensor name '{name}'")
                out[name] = t
            return out
        return v

    @model_validator(mode="after")
    def _check(self) -> Program:
        from ir.validate import check_program

        check_program(self)
        return self

    # Construction paths re-raise the IRError that pydantic wrapped into a ValidationError.
    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as e:
            raise (_unwrap(e) or e) from None

    @classmethod
    def model_validate(cls, obj: Any, **kw: Any) -> Program:
        try:
            return super().model_validate(obj, **kw)
        except ValidationError as e:
            raise (_unwrap(e) or e) from None

    @classmethod
    def model_validate_json(cls, data: str | bytes, **kw: Any) -> Program:
        try:
            return super().model_validate_json(data, **kw)
        except ValidationError as e:
            raise (_unwrap(e) or e) from None

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> Program:
        """Copy; with ``update`` the result is validated like a new program (caches are rebuilt)."""
        if update:
            fields = {k: getattr(self, k) for k in type(self).model_fields}
            return type(self)(**{**fields, **update})
        copied = super().model_copy(deep=deep)
        for key in _CACHES:
            copied.__dict__.pop(key, None)
        return copied

    # --- serialisation ---------------------------------------------------------------------
    def to_json(self, indent: int | None = None) -> str:
        return self.model_dump_json(indent=indent)

    @classmethod
    def from_json(cls, text: str | bytes) -> Program:
        return cls.model_validate_json(text)

    # --- lookup ----------------------------------------------------------------------------
    def tensor(self, name: str) -> Tensor:
        return self.tensors[name]

    @cached_property
    def _op_index(self) -> dict[str, Op]:
        return {op.name: op for op in self.ops}

    def op(self, name: str) -> Op:
        return self._op_index[name]

    def producers(self) -> dict[str, str]:
        """tensor name -> name of the op that produces it (only produced tensors)."""
        return {t: op.name for op in self.ops for t in op.outputs}

    def consumers(self) -> dict[str, list[str]]:
        """tensor name -> names of the ops that read it, in op order (every tensor is a key)."""
        out: dict[str, list[str]] = {name: [] for name in self.tensors}
        for op in self.ops:
            for t in dict.fromkeys(op.inputs):
                out[t].append(op.name)
        return out

    # --- graph -----------------------------------------------------------------------------
    def graph(self) -> nx.DiGraph:
        """Op-level DAG: nodes are op names (attr ``op``), edge u->v carries ``tensors`` read by v."""
        g = nx.DiGraph()
        for op in self.ops:
            g.add_node(op.name, op=op)
        prod = self.producers()
        for op in self.ops:
            for t in op.inputs:
                if t in prod:
                    u = prod[t]
                    if g.has_edge(u, op.name):
                        g.edges[u, op.name]["tensors"].append(t)
                    else:
                        g.add_edge(u, op.name, tensors=[t])
        return g

    @cached_property
    def _topo(self) -> list[Op]:
        index = {op.name: i for i, op in enumerate(self.ops)}
        order = nx.lexicographical_topological_sort(self.graph(), key=index.__getitem__)
        return [self._op_index[n] for n in order]

    def topo_order(self) -> list[Op]:
        """Deterministic topological order: among ready ops, the earliest in ``ops`` first."""
        return list(self._topo)

    # --- resident data ---------------------------------------------------------------------
    def storage(self, name: str) -> str:
        """Root resident tensor holding ``name`` (follows kv_append versions; else ``name``)."""
        prod = self.producers()
        while name in prod and self.op(prod[name]).kind is OpKind.kv_append:
            name = self.op(prod[name]).inputs[0]
        return name

    def resident_operand(self, op: Op | str) -> str | None:
        """Root weight / kv cache streamed by a PIM-capable op; None for host-only ops."""
        op = self.op(op) if isinstance(op, str) else op
        if op.kind not in RESIDENT_OPERAND:
            return None
        return self.storage(op.inputs[RESIDENT_OPERAND[op.kind]])

    def state_updates(self) -> dict[str, str]:
        """Root kv cache -> its final version after this program (for the next step's state)."""
        out = {}
        for op in self.topo_order():
            if op.kind is OpKind.kv_append:
                out[self.storage(op.outputs[0])] = op.outputs[0]
        return out

    def weights(self) -> list[Tensor]:
        return [t for t in self.tensors.values() if t.role is Role.weight]

    def kv_caches(self) -> list[Tensor]:
        """Root kv caches (state); appended versions share their storage and are not listed."""
        prod = self.producers()
        return [t for t in self.tensors.values() if t.role is Role.kv_cache and t.name not in prod]

    def activations(self) -> list[Tensor]:
        return [t for t in self.tensors.values() if t.role is Role.activation]

    def weight_bytes(self) -> int:
        return sum(t.nbytes for t in self.weights())

    def pim_weight_bytes(self) -> int:
        """Bytes of weights streamed by PIM-capable ops (gemv matrices; not embedding gathers, norms, biases)."""
        names = {self.resident_operand(op) for op in self.ops if op.kind is OpKind.gemv}
        return sum(self.tensors[n].nbytes for n in names)

    def kv_bytes(self) -> int:
        return sum(t.nbytes for t in self.kv_caches())

    def num_parameters(self) -> int:
        return sum(t.numel for t in self.weights())
