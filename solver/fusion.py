"""Fusion candidates in a program: gemvs that share their input (one broadcast for Q/K/V, for
gate/up) and chains of host ops that one kernel launch can run."""

from __future__ import annotations

from ir import OpKind, Program


def fusion_groups(program: Program) -> dict[str, list[str]]:
    """Gemvs of one layer that read the same input (Q/K/V; gate/up): first op -> members."""
    by_input: dict[tuple, list[str]] = {}
    for op in program.topo_order():
        if op.kind is OpKind.gemv:
            w = program.tensors[op.inputs[1]]
            by_input.setdefault((op.inputs[0], w.shape[1]), []).append(op.name)
    return {ms[0]: ms for ms in by_input.values() if len(ms) > 1}


def host_chains(program: Program) -> dict[str, list[str]]:
    """Elementwise/normalisation chains on the host that one kernel launch can run: consecutive
    host-only ops (in topological order, same layer) where each consumes the previous one's
    output. First op -> members (length >= 2)."""
    host_only = {
        OpKind.layernorm,
        OpKind.rmsnorm,
        OpKind.rope,
        OpKind.softmax,
        OpKind.gelu,
        OpKind.relu,
        OpKind.silu,
        OpKind.mul,
        OpKind.add,
    }
    order = program.topo_order()
    chains: dict[str, list[str]] = {}
    i = 0
    while i < len(order):
        run = [order[i]]
        while (
            i + len(run) < len(order)
            and run[-1].kind in host_only
            and order[i + len(run)].kind in host_only
            and run[-1].outputs[0] in order[i + len(run)].inputs
            and run[-1].attrs.get("layer") == order[i + len(run)].attrs.get("layer")
        ):
            run.append(order[i + len(run)])
        if len(run) > 1 and run[0].kind in host_only:
            chains[run[0].name] = [o.name for o in run]
        i += len(run)
    return chains
