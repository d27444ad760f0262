"""The decisions lowering offers the solvers that a run may withhold (`pimsat solve|compare
--without`), to measure what each buys: `LowerOptions.without` (solver/lower.py) turns them off.
A module of its own so that the CLI names them without importing the lowering."""

from __future__ import annotations

from enum import StrEnum


class Alternative(StrEnum):
    FUSION = "fusion"  # gemvs that share their input as one matrix; host-op chains as one launch
    HOST_GEMV = "host-gemv"  # a gemv on the host matrix unit, or its last rows there (split modes)
    K_SPLIT = "k-split"  # a gemv split along k over two halves of the groups (solver/ksplit.py)
    HEAD_GROUPS = "head-groups"  # attention pipelined by head groups (solver/head_groups.py)
