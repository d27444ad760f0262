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
  Likewise an EPI with ``chain=1`` (the epilogues of a fused group of GEMVs, one launch). From
  ISA 1.6 a chained HOP, EPI or HMV continues the launch of whichever of the three came before it
  (`chain_error`), or of a LAUNCH, which launches the kernel without work (`dispatch_cycles`):
  one host kernel that waits on the units' signals between its ops.
* ``host_mv_cycles(hw, program, i, rows)`` - rows of gemv ``program.ops[i]`` on the host (HMV):
  ``dispatch_cycles + ceil(B*rows*K / matrix_macs_per_cycle)``; with ``chain=1`` no dispatch.
* ``epilogue_cycles(hw, program, i)`` - epilogue of a PIM-dispatched op (EPI):
  ``dispatch_cycles + ceil(output elements / vector_elements_per_cycle)``.
* A head range (ISA 1.4: HOP/EPI ``head0``, ``heads`` > 0): a softmax over attention scores
  [B, H, L] run on heads head0.. only, an attn_score/attn_context epilogue of those heads only:
  the same formulas over the range's elements (``heads / H`` of every tensor counted).
* A batch range (ISA 1.5: HOP/EPI ``batch0``, ``batches`` > 0): a host op on batch rows batch0..
  only (an op other than gemv/attention whose activation inputs and output all lead with the
  batch axis, `op_batch`), an epilogue of a PIM op's outputs of those rows: the same formulas
  over the range's elements (``batches / B`` of every activation tensor counted). A program runs
  a batch as micro-batches so (solver/micro_batch.py).
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


HEAD_RANGES_ISA = (1, 4)  # the first ISA version whose HOP/EPI take a head range


def has_head_ranges(hw: Hardware) -> bool:
    """Whether the device's ISA runs HOP/EPI on head ranges (ISA 1.4)."""
    return tuple(map(int, hw.isa_version.split("."))) >= HEAD_RANGES_ISA


HEAD_RANGE_KINDS = {"HOP": ("softmax",), "EPI": ("attn_score", "attn_context")}  # ops a head range may cut


def op_heads(program, op) -> int:
    """The heads an op's head range counts: the attention ops' `heads`; a softmax's axis 1 of
    its [B, H, L] input (0: not cut by heads)."""
    if op.kind.value in ("attn_score", "attn_context"):
        return int(op.attrs["heads"])
    shape = program.tensors[op.inputs[0]].shape
    return int(shape[1]) if op.kind.value == "softmax" and len(shape) == 3 else 0


def head_range_error(program, op_index: int, mnemonic: str, head0: int, heads: int) -> str | None:
    """Why a HOP/EPI head range is not valid for op ``program.ops[op_index]`` (None: it is, or
    heads = 0, the whole op)."""
    if heads == 0:
        return None if head0 == 0 else f"head0 = {head0} without heads (heads = 0 is the whole op)"
    op = program.ops[op_index]
    if op.kind.value not in HEAD_RANGE_KINDS[mnemonic]:
        return f"a head range applies to {'/'.join(HEAD_RANGE_KINDS[mnemonic])}, not {op.kind.value} '{op.name}'"
    total = op_heads(program, op)
    if total == 0:
        return f"op '{op.name}' has no heads axis (a softmax over [B, H, L])"
    if head0 + heads > total:
        return f"heads {head0}..{head0 + heads - 1} outside op '{op.name}''s {total} heads"
    return None


BATCH_RANGES_ISA = (1, 5)  # the first ISA version whose HOP/EPI take a batch range


def has_batch_ranges(hw: Hardware) -> bool:
    """Whether the device's ISA runs HOP/EPI on batch ranges (ISA 1.5)."""
    return tuple(map(int, hw.isa_version.split("."))) >= BATCH_RANGES_ISA


CROSS_CHAIN_ISA = (1, 6)  # the first ISA version whose chain=1 follows any host compute instruction
HOST_COMPUTE = ("HOP", "EPI", "HMV")  # the host instructions that run in a kernel launch
LAUNCHES = (*HOST_COMPUTE, "LAUNCH")  # the host instructions whose launch a chained one may continue (ISA 1.6)


def chains_across_kinds(hw: Hardware) -> bool:
    """Whether a chained HOP/EPI/HMV may continue the launch of a host instruction of another of
    these kinds (ISA 1.6); before, only of its own kind."""
    return tuple(map(int, hw.isa_version.split("."))) >= CROSS_CHAIN_ISA


def chain_error(hw: Hardware, before: str | None, mnemonic: str, waited: bool = False) -> str | None:
    """Why `mnemonic` with chain=1 cannot continue the launch of `before`, the nearest host
    instruction before it other than SIG/WAIT (None: it can); `waited`: a WAIT came between. Only
    SIG and WAIT may come between: a WAIT keeps the kernel launched while it waits for the units'
    signal, on a host with `persistent_kernel` (else a WAIT ends the launch)."""
    if before is None:
        return f"{mnemonic} chain=1 is the host stream's first instruction: there is no launch to continue"
    if waited and not hw.host.persistent_kernel:
        return (
            f"{mnemonic} chain=1 follows a WAIT, and this host keeps no kernel launched across a wait "
            "(host.persistent_kernel = false): it launches anew"
        )
    if before == mnemonic or (chains_across_kinds(hw) and before in LAUNCHES):
        return None
    what = (
        "a LAUNCH, HOP, EPI or HMV"
        if chains_across_kinds(hw)
        else f"a {mnemonic} (ISA {hw.isa_version}; from 1.6 any of LAUNCH, HOP, EPI, HMV)"
    )
    return (
        f"{mnemonic} chain=1 must follow {what} (it continues that kernel launch; "
        f"only SIG/WAIT may come between), not {before}"
    )


def launch_error(hw: Hardware) -> str | None:
    """Why a LAUNCH is not valid on `hw` (None: it is)."""
    if chains_across_kinds(hw):
        return None
    return f"LAUNCH needs ISA 1.6; the device declares isa_version {hw.isa_version}"


def op_batch(program, op) -> int:
    """The batch rows a batch range of an op counts: for an op in memory (its EPI) the leading
    axis of its output; for a host op (not gemv/attention) the leading axis its output and every
    activation input share (0: they do not share one, or an op the host's matrix unit runs)."""
    out = program.tensors[op.outputs[0]].shape
    if not out:
        return 0
    if op.kind.value in MATRIX_KINDS:
        return int(out[0])
    if program.tensors[op.outputs[0]].role.value != "activation":
        return 0  # a kv_append writes its cache version
    acts = [program.tensors[n].shape for n in op.inputs if program.tensors[n].role.value == "activation"]
    return int(out[0]) if acts and all(s and s[0] == out[0] for s in acts) else 0


def batch_range_error(program, op_index: int, mnemonic: str, batch0: int, batches: int, heads: int = 0) -> str | None:
    """Why a HOP/EPI batch range is not valid for op ``program.ops[op_index]`` (None: it is, or
    batches = 0, every row)."""
    if batches == 0:
        return None if batch0 == 0 else f"batch0 = {batch0} without batches (batches = 0 is every batch row)"
    op = program.ops[op_index]
    if heads:
        return "a head range and a batch range do not combine"
    if mnemonic == "HOP" and op.kind.value in MATRIX_KINDS:
        return f"a HOP of {op.kind.value} '{op.name}' (the host's matrix unit) runs every batch row"
    total = op_batch(program, op)
    if total == 0:
        return f"op '{op.name}' has no batch axis its output and activation inputs share"
    if batch0 + batches > total:
        return f"batch rows {batch0}..{batch0 + batches - 1} outside op '{op.name}''s {total}"
    return None


def _share(program, op, n: int, heads: int, batches: int = 0) -> int:
    """Elements of a tensor of `n` elements in a range of `heads` heads or `batches` batch rows of
    the op (0: all)."""
    if batches:
        return n * batches // op_batch(program, op)
    return n if heads == 0 else n * heads // op_heads(program, op)


def host_op_cycles(hw: Hardware, program, op_index: int, heads: int = 0, batches: int = 0) -> int:
    """Cycles the host unit is busy running op ``program.ops[op_index]`` (HOP; `heads` > 0: a
    softmax on that many of its heads; `batches` > 0: on that many batch rows)."""
    op = program.ops[op_index]
    if op.kind.value in MATRIX_KINDS:
        work, rate = _macs(program, op), hw.host.matrix_macs_per_cycle
    else:
        work = _activation_elements(program, op.inputs) + _activation_elements(program, op.outputs)
        work = _share(program, op, work, heads, batches)
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


def chain_cycles(hw: Hardware, program, op_indices, batches: int = 0) -> list[int]:
    """Busy cycles of each op of a host chain run as one kernel launch (the first HOP, then HOPs
    with chain=1; `batches` > 0: on that many batch rows): only the first pays ``dispatch_cycles``."""
    launch = hw.host.dispatch_cycles
    return [host_op_cycles(hw, program, i, 0, batches) - (launch if k else 0) for k, i in enumerate(op_indices)]


def epilogue_chain_cycles(hw: Hardware, program, op_indices, batches: int = 0) -> list[int]:
    """Busy cycles of each epilogue of a fused group run as one launch (EPI, then EPIs with
    chain=1; `batches` > 0: of that many batch rows): only the first pays ``dispatch_cycles``."""
    launch = hw.host.dispatch_cycles
    return [epilogue_cycles(hw, program, i, 0, batches) - (launch if k else 0) for k, i in enumerate(op_indices)]


def epilogue_cycles(hw: Hardware, program, op_index: int, heads: int = 0, batches: int = 0) -> int:
    """Cycles of the epilogue (EPI) of PIM-dispatched op ``program.ops[op_index]`` (`heads` > 0:
    of that many of an attention op's heads; `batches` > 0: of that many batch rows)."""
    op = program.ops[op_index]
    out = _share(program, op, _numel(program.tensors[op.outputs[0]].shape), heads, batches)
    return hw.host.dispatch_cycles + -(-out // hw.host.vector_elements_per_cycle)
