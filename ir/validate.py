"""Whole-program rules, checked once when a :class:`~ir.program.Program` is built.

1. Names: tensor keys equal tensor names; op names unique and non-empty.
2. References: every tensor named by an op or as program input/output exists.
3. Single assignment: each tensor is produced by at most one op, and an op names an output once.
4. Shapes, dtypes, roles and attrs per op (:func:`ir.ops.check_op`).
5. Roles: program inputs are activations and are not produced; weights and root kv caches are not
   produced; ops produce activations, except ``kv_append`` which produces ``<cache>@<position>``.
6. Definitions: every activation that is read or output is a program input or produced.
7. In-place safety: a cache version read by a ``kv_append`` has no other reader; attention at
   ``position`` does not read a cache version appended at an earlier position.
8. The op graph is acyclic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import networkx as nx

from ir.errors import IRError
from ir.ops import OpKind, check_op
from ir.types import Role

if TYPE_CHECKING:
    from ir.program import Program


def _names(p: Program) -> None:
    for key, t in p.tensors.items():
        if key != t.name:
            raise IRError(f"program '{p.name}': tensors['{key}']: key differs from tensor name '{t.name}'")
    seen: set[str] = set()
    for i, op in enumerate(p.ops):
        if not op.name:
            raise IRError(f"program '{p.name}': ops[{i}]: empty op name")
        if any(ch.isspace() or ch in "=()," for ch in op.name):
            raise IRError(f"op '{op.name}' ({op.kind.value}): name: no whitespace or '=(),' allowed")
        if op.name in seen:
            raise IRError(f"op '{op.name}' ({op.kind.value}): name: duplicate op name")
        seen.add(op.name)


def _io(p: Program, field: str, names: list[str]) -> None:
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise IRError(f"program '{p.name}': {field}: duplicate names {dup}")
    for i, n in enumerate(names):
        if n not in p.tensors:
            raise IRError(f"program '{p.name}': {field}[{i}]: unknown tensor '{n}'")


def _references(p: Program) -> dict[str, str]:
    producer: dict[str, str] = {}
    for op in p.ops:
        for field in ("inputs", "outputs"):
            for i, n in enumerate(getattr(op, field)):
                if n not in p.tensors:
                    raise IRError(f"op '{op.name}' ({op.kind.value}): {field}[{i}]: unknown tensor '{n}'")
        for i, n in enumerate(op.outputs):
            if n in producer:
                other = producer[n]
                what = "names it twice" if other == op.name else f"is also produced by op '{other}'"
                raise IRError(f"op '{op.name}' ({op.kind.value}): outputs[{i}] '{n}': {what}")
            producer[n] = op.name
    return producer


def _roles(p: Program, producer: dict[str, str]) -> None:
    kinds = {op.name: op.kind.value for op in p.ops}
    for i, n in enumerate(p.inputs):
        t = p.tensors[n]
        if t.role is not Role.activation:
            raise IRError(
                f"program '{p.name}': inputs[{i}] '{n}': role {t.role.value}; weights and kv caches "
                "are state, not program inputs"
            )
        if n in producer:
            raise IRError(
                f"op '{producer[n]}' ({kinds[producer[n]]}): outputs: '{n}' is a program input and must not be produced"
            )
    for op in p.ops:
        for i, n in enumerate(op.outputs):
            t = p.tensors[n]
            if t.role is Role.weight:
                raise IRError(f"op '{op.name}' ({op.kind.value}): outputs[{i}] '{n}': weights must not be produced")
            if op.kind is OpKind.kv_append:
                cache, pos = op.inputs[0] if op.inputs else "?", op.attrs.get("position")
                if n != f"{cache}@{pos}":
                    raise IRError(
                        f"op '{op.name}' (kv_append): outputs[{i}] '{n}': must be named "
                        f"'{cache}@{pos}' (<cache>@<position>)"
                    )
            elif t.role is Role.kv_cache:
                raise IRError(
                    f"op '{op.name}' ({op.kind.value}): outputs[{i}] '{n}': only kv_append produces kv cache versions"
                )


def _defined(p: Program, producer: dict[str, str]) -> None:
    given = set(p.inputs)
    for op in p.ops:
        for i, n in enumerate(op.inputs):
            if p.tensors[n].role is Role.activation and n not in given and n not in producer:
                raise IRError(
                    f"op '{op.name}' ({op.kind.value}): inputs[{i}] '{n}': activation is neither "
                    "a program input nor produced by an op"
                )
    for i, n in enumerate(p.outputs):
        if p.tensors[n].role is Role.activation and n not in given and n not in producer:
            raise IRError(f"program '{p.name}': outputs[{i}] '{n}': activation is never computed")


def _in_place(p: Program, producer: dict[str, str]) -> None:
    readers: dict[str, list[str]] = {}
    for op in p.ops:
        for n in dict.fromkeys(op.inputs):
            readers.setdefault(n, []).append(op.name)
    ops = {op.name: op for op in p.ops}
    for op in p.ops:
        if op.kind is OpKind.kv_append:
            others = [r for r in readers.get(op.inputs[0], []) if r != op.name]
            if others:
                raise IRError(
                    f"op '{op.name}' (kv_append): inputs[0] '{op.inputs[0]}': the cache is updated in "
                    f"place but is also read by {others}; read '{op.outputs[0]}' instead"
                )
        if op.kind in (OpKind.attn_score, OpKind.attn_context):
            src = producer.get(op.inputs[1])
            if src and ops[src].kind is OpKind.kv_append:
                appended = ops[src].attrs["position"]
                if op.attrs["position"] > appended:
                    raise IRError(
                        f"op '{op.name}' ({op.kind.value}): attrs.position: {op.attrs['position']} "
                        f"reads past the last appended position {appended} of '{op.inputs[1]}'"
                    )


def _acyclic(p: Program) -> None:
    g = p.graph()
    if not nx.is_directed_acyclic_graph(g):
        cycle = [u for u, _ in nx.find_cycle(g)]
        raise IRError(
            f"op '{cycle[0]}' ({p.op(cycle[0]).kind.value}): inputs: op graph has a cycle: "
            + " -> ".join(cycle + [cycle[0]])
        )


def check_program(p: Program) -> None:
    """Raise :class:`IRError` at the first rule ``p`` breaks (see module docstring)."""
    _names(p)
    _io(p, "inputs", p.inputs)
    _io(p, "outputs", p.outputs)
    producer = _references(p)
    for op in p.ops:
        check_op(op.name, op.kind, [p.tensors[n] for n in op.inputs], [p.tensors[n] for n in op.outputs], op.attrs)
    _roles(p, producer)
    _defined(p, producer)
    _in_place(p, producer)
    _acyclic(p)
