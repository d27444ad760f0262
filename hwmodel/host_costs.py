"""The host unit's cost model: how many cycles host work takes (hardware semantics, used by the
solver to time tasks and by the simulator to run the host stream).

Costs, in memory-clock cycles (all integers):

* ``host_op_cycles(hw, program, i)`` - op ``program.ops[i]`` run on the host (HOP):
  ``dispatch_cycles + ceil(work / rate)`` where
    - gemv, attn_score, attn_context: work = multiply-accumulates, rate = ``matrix_macs_per_cycle``
      (gemv B*N*K; attn_score and attn_context B*heads*(position+1)*head_dim);
    - every other op: work = elements read + elements written, counting activation tensors only
      (weights, norm parameters and kv caches are not counted), rate = ``vector_elements_per_cycle``.
  A HOP with ``chain=1`` is fused with the HOP before it (one kernel launch): no dispatch cost.
  Likewise an EPI with ``chain=1`` (the epilogues of a fused group of GEMVs, one launch).
* ``host_mv_cycles(hw, program, i, rows)`` - rows of gemv ``program.ops[i]`` on the host (HMV):
  ``dispatch_cycles + ceil(B*rows*K / matrix_macs_per_cycle)``; with ``chain=1`` no dispatch.
* ``epilogue_cycles(hw, program, i)`` - epilogue of a PIM-dispatched op (EPI):
  ``dispatch_cycles + ceil(output elements / vector_elements_per_cycle)``.
"""

from __future__ import annotations

import math

from .model import Hardware

MATRIX_KINDS = ("gemv", "attn_score", "attn_context")  # ops the host runs on its matrix unit


def _numel(shape) -> int:
    return math.prod(shape)


def _macs(program, op) -> int:
    kind = op.kind.value
    if kind == "gemv":
        b, k = program.tensors[op.inputs[0]].shape
        n = program.tensors[op.inputs[1]].shape[0]
        return b * n * k
    a = op.attrs
    b = program.tensors[op.inputs[0]].shape[0]
    return b * a["heads"] * (a["position"] + 1) * a["head_dim"]


def _activation_elements(program, names) -> int:
    return sum(_numel(program.tensors[n].shape) for n in names if program.tensors[n].role.value == "activation")


def host_op_cycles(hw: Hardware, program, op_index: int) -> int:
    """Cycles the host unit is busy running op ``program.ops[op_index]`` (HOP)."""
    op = program.ops[op_index]
    if op.kind.value in MATRIX_KINDS:
        work, rate = _macs(program, op), hw.host.matrix_macs_per_cycle
    else:
        work = _activation_elements(program, op.inputs) + _activation_elements(program, op.outputs)
        rate = hw.host.vector_elements_per_cycle
    return hw.host.dispatch_cycles + -(-work // rate)


def host_mv_cycles(hw: Hardware, program, op_index: int, rows: int) -> int:
    """Cycles the host unit is busy with `rows` rows of gemv ``program.ops[op_index]`` (HMV)."""
    shape = program.tensors[program.ops[op_index].inputs[0]].shape  # [..., K]: every leading index a vector
    b, k = math.prod(shape[:-1]), shape[-1]
    return hw.host.dispatch_cycles + -(-b * rows * k // hw.host.matrix_macs_per_cycle)


def mv_chain_cycles(hw: Hardware, program, ranges) -> list[int]:
    """Busy cycles of each HMV of one launch, `ranges` = [(op index, rows), ...] (the first HMV,
    then HMVs with chain=1): only the first pays ``dispatch_cycles``."""
    return [
        host_mv_cycles(hw, program, i, rows) - (hw.host.dispatch_cycles if k else 0)
        for k, (i, rows) in enumerate(ranges)
    ]


def chain_cycles(hw: Hardware, program, op_indices) -> list[int]:
    """Busy cycles of each op of a host chain run as one kernel launch (the first HOP, then HOPs
    with chain=1): only the first pays ``dispatch_cycles``."""
    return [host_op_cycles(hw, program, i) - (hw.host.dispatch_cycles if k else 0) for k, i in enumerate(op_indices)]


def epilogue_chain_cycles(hw: Hardware, program, op_indices) -> list[int]:
    """Busy cycles of each epilogue of a fused group run as one launch (EPI, then EPIs with
    chain=1): only the first pays ``dispatch_cycles``."""
    return [epilogue_cycles(hw, program, i) - (hw.host.dispatch_cycles if k else 0) for k, i in enumerate(op_indices)]


def epilogue_cycles(hw: Hardware, program, op_index: int) -> int:
    """Cycles of the epilogue (EPI) of PIM-dispatched op ``program.ops[op_index]``."""
    op = program.ops[op_index]
    out = _numel(program.tensors[op.outputs[0]].shape)
    return hw.host.dispatch_cycles + -(-out // hw.host.vector_elements_per_cycle)
