"""The decisions lowering offers the solvers that a run may withhold (`pimsat solve|compare
--without`), to measure what each buys: `LowerOptions.without` (solver/lower.py) turns them off,
`offered` counts them in a lowered problem (the report's `offered`). A module of its own, light,
so that the CLI names them without importing the lowering."""

from __future__ import annotations

from enum import StrEnum


class Alternative(StrEnum):
    FUSION = "fusion"  # gemvs that share their input as one matrix; host-op chains as one launch
    HOST_GEMV = "host-gemv"  # a gemv on the host matrix unit, or its last rows there (split modes)
    K_SPLIT = "k-split"  # a gemv split along k over two halves of the groups (solver/ksplit.py)
    HEAD_GROUPS = "head-groups"  # attention pipelined by head groups (solver/head_groups.py)
    MICRO_BATCH = "micro-batch"  # a batch run as micro-batches (solver/micro_batch.py)


def offered(problem) -> dict[str, int]:
    """Per Alternative, how many modes of it lowering offered the solvers, read off the modes'
    tags (solver/lower.py, split.py, ksplit.py, head_groups.py): fused (a fused gemv group's
    modes, a host chain's one launch), host-GEMV and split (a gemv's "host" mode reads weights,
    a host op's does not), k-split, head groups (modes whose results are ready by head range),
    micro-batches (modes whose results are ready by batch rows)."""
    modes = [m for j in problem.jobs for m in j.modes]

    def on_host(m) -> bool:
        reads = m.name == "host" and m.payload is not None and bool(m.payload.tilings)
        return reads or m.name.startswith(("split", "fused-split"))

    return {
        str(Alternative.FUSION): sum(m.name.startswith("fused") for m in modes),
        str(Alternative.HOST_GEMV): sum(map(on_host, modes)),
        str(Alternative.K_SPLIT): sum("ksplit" in m.name for m in modes),
        str(Alternative.HEAD_GROUPS): sum(bool(m.head_outputs) for m in modes),
        str(Alternative.MICRO_BATCH): sum(bool(m.batch_outputs) for m in modes),
    }
