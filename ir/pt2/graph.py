"""The exported graph as plain records: nodes with decoded arguments, inputs by kind, outputs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ir.pt2.archive import Archive, ArchiveError, TensorMeta, tensor_meta


@dataclass(frozen=True)
class Ref:
    """A reference to another value of the graph (a tensor by name)."""

    name: str


@dataclass
class Node:
    name: str
    target: str  # e.g. aten.linear.default (the "torch.ops." prefix dropped)
    args: dict[str, Any]  # schema name -> python value, Ref, list of Ref, or None
    outputs: list[str | None]
    module: str  # innermost nn_module_stack path ('' at the top)
    module_class: str
    layer: int | None  # index of the enclosing ModuleList item (the decoder layer)

    def where(self) -> str:
        mod = f"{self.module} ({self.module_class})" if self.module else "the top-level module"
        return f"node '{self.name}' ({self.target}) in {mod}"


@dataclass
class Graph:
    nodes: list[Node]
    params: dict[str, str]  # graph input name -> fqn of a parameter or buffer
    constants: dict[str, str]  # graph input name -> fqn of a lifted tensor constant
    user_inputs: list[str]
    user_outputs: list[str]
    mutations: dict[str, str] = field(default_factory=dict)  # output name -> buffer fqn it mutates
    meta: dict[str, TensorMeta] = field(default_factory=dict)


def _arg(a: dict[str, Any], where: str) -> Any:
    (kind, v), *_ = a.items()
    if kind == "as_tensor":
        return Ref(v["name"])
    if kind == "as_tensors":
        return [Ref(t["name"]) for t in v]
    if kind == "as_optional_tensors":
        return [None if "as_none" in t else Ref(t["as_tensor"]["name"]) for t in v]
    if kind == "as_float":
        return float(v)  # "Infinity", "-Infinity", "NaN" are strings in the JSON
    if kind == "as_floats":
        return [float(x) for x in v]
    if kind in ("as_int", "as_bool", "as_string", "as_ints", "as_bools", "as_strings"):
        return v
    if kind in ("as_scalar_type", "as_layout", "as_memory_format"):
        return int(v)
    if kind in ("as_none", "as_device"):
        return None
    if kind == "as_sym_ints":
        if all("as_int" in s for s in v):
            return [s["as_int"] for s in v]
    if kind == "as_sym_int" and "as_int" in v:
        return v["as_int"]
    raise ArchiveError(f"{where}: argument kind {kind} is not supported (dynamic shapes, symbolic or custom objects)")


def _module(meta: dict[str, Any]) -> tuple[str, str, int | None]:
    stack = [e.split(",") for e in meta.get("nn_module_stack", "").split(";") if e]
    path, cls, layer = "", "", None
    for entry in stack:
        if len(entry) >= 3:
            path, cls = entry[1], entry[-1].rsplit(".", 1)[-1]
            last = path.rsplit(".", 1)[-1]
            if last.isdigit() and layer is None:
                layer = int(last)
    return path, cls, layer


def parse(archive: Archive) -> Graph:
    g, sig, src = archive.graph, archive.signature, archive.path
    symbols = sorted(archive.model.get("range_constraints") or {}) or sorted(g.get("sym_int_values") or {})
    if symbols:
        raise ArchiveError(
            f"{src}: dynamic shapes are not supported (symbolic sizes {', '.join(symbols[:4])}); "
            "export the decode step with static shapes"
        )
    params, constants, user_inputs = {}, {}, []
    for spec in sig["input_specs"]:
        (kind, v), *_ = spec.items()
        name = v["arg"]["name"] if "name" in v["arg"] else v["arg"].get("as_tensor", {}).get("name")
        if kind == "parameter":
            params[name] = v["parameter_name"]
        elif kind == "buffer":
            params[name] = v["buffer_name"]
        elif kind == "tensor_constant":
            constants[name] = v["tensor_constant_name"]
        elif kind == "user_input":
            if name is None:
                raise ArchiveError(f"{src}: a user input that is not a tensor ({v['arg']}) is not supported")
            user_inputs.append(name)
        else:
            raise ArchiveError(f"{src}: graph input of kind {kind} is not supported")
    outputs, mutations = [], {}
    for spec in sig["output_specs"]:
        (kind, v), *_ = spec.items()
        name = v["arg"].get("name") or v["arg"].get("as_tensor", {}).get("name")
        if kind == "user_output":
            outputs.append(name)
        elif kind == "buffer_mutation":
            mutations[name] = v["buffer_name"]
        else:
            raise ArchiveError(f"{src}: graph output of kind {kind} is not supported")
    nodes = []
    for n in g["nodes"]:
        target = n["target"].removeprefix("torch.ops.")
        where = f"{src}: node '{n['name']}' ({target})"
        args = {a["name"]: _arg(a["arg"], where) for a in n["inputs"]}
        outs: list[str | None] = []
        for o in n["outputs"]:
            if "as_tensor" in o:
                outs.append(o["as_tensor"]["name"])
            elif "as_tensors" in o:
                outs += [t["name"] for t in o["as_tensors"]]
            elif "as_none" in o:
                outs.append(None)
            else:
                raise ArchiveError(f"{where}: output kind {next(iter(o))} is not supported")
        path, cls, layer = _module(n.get("metadata", {}))
        nodes.append(Node(n["name"], target, args, outs, path, cls, layer))
    meta = {k: tensor_meta(v, f"{src}: tensor '{k}'") for k, v in g["tensor_values"].items()}
    return Graph(nodes, params, constants, user_inputs, outputs, mutations, meta)


__all__ = ["Graph", "Node", "Ref", "parse"]
