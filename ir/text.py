"""Stable, human-readable text form of a program (for diffs and golden tests).

::

    program tiny-llama.decode.b1.c3
    meta {"batch": 1, ...}                      # json, sorted keys
    input input_ids
    output lm_head.out
    tensor weight embed_tokens.weight fp16[256,64]
    ...
    op embed_tokens = embed(input_ids, embed_tokens.weight) -> embed_tokens.out
    op layers.0.self_attn.q_rope = rope(...) -> ... {head_dim=16, heads=4, layer=0, position=3, theta=10000.0}

Tensors appear in program order, ops in :meth:`Program.topo_order`, attrs sorted by key.
"""

from __future__ import annotations

import json

from ir.program import Program


def _value(v) -> str:
    return json.dumps(v) if isinstance(v, (str, bool)) else repr(v)


def format_program(p: Program) -> str:
    lines = [f"program {p.name}", f"meta {json.dumps(p.meta, sort_keys=True)}"]
    lines += [f"input {n}" for n in p.inputs]
    lines += [f"output {n}" for n in p.outputs]
    for t in p.tensors.values():
        lines.append(f"tensor {t.role.value} {t.name} {t.dtype.value}[{','.join(map(str, t.shape))}]")
    for op in p.topo_order():
        attrs = ", ".join(f"{k}={_value(op.attrs[k])}" for k in sorted(op.attrs))
        line = f"op {op.name} = {op.kind.value}({', '.join(op.inputs)}) -> {', '.join(op.outputs)}"
        lines.append(line + (f" {{{attrs}}}" if attrs else ""))
    return "\n".join(lines) + "\n"
