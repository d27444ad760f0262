"""Synthetic scheduling problems shared by the solver tests and the solver benchmark."""

from __future__ import annotations

from .problem import HOST, Edge, Mode, Task


def pim_mode(
    job: str, groups: list[str], bcast: int, mac: int, readout: int, gather: int, rows: int, name: str | None = None
) -> Mode:
    """Broadcast -> MAC -> read-out on each group of `groups`, then a host gather (output)."""
    name = name or f"pim[{','.join(groups)}]"
    k = len(groups)
    tasks, edges, inputs = [], [], []
    for g in groups:
        b = Task(f"{job}/{name}/{g}/bcast", g, bcast)
        m = Task(f"{job}/{name}/{g}/mac", g, max(1, mac // k))
        r = Task(f"{job}/{name}/{g}/read", g, max(1, readout // k))
        tasks += [b, m, r]
        edges += [Edge(b.name, m.name), Edge(m.name, r.name)]
        inputs.append(b.name)
    out = Task(f"{job}/{name}/gather", HOST, gather)
    tasks.append(out)
    edges += [Edge(f"{job}/{name}/{g}/read", out.name) for g in groups]
    usage = {g: -(-rows // k) for g in groups}
    return Mode(name, tuple(tasks), tuple(edges), tuple(inputs), out.name, usage)
