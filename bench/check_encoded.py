"""Check, channel by channel, that the encoded parts a streamed simulation reads equal the
encoding of the listed streams (what `--out` writes and functional runs simulate).

    .venv/bin/python bench/check_encoded.py INSTANCE... [--methods greedy,naive]

Exits non-zero on the first instance and method whose tables differ. Tests cover small cases;
this runs the check at real scale (a layer at batch 16 is tens of millions of instructions).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from compiled import compile_lazily

from sim.encode import encode_stream


def differing_channels(path: str, method: str) -> tuple[int, int]:
    hw, compiled = compile_lazily(path, method)
    bad = 0
    for stream in compiled.streams.channels:
        if len(stream):  # the encoded parts against the instruction objects of the same stream
            bad += not np.array_equal(stream.rows(0, len(stream)), encode_stream(hw, list(stream)))
    return bad, len(compiled.streams.channels)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("instances", nargs="+")
    ap.add_argument("--methods", default="greedy,naive")
    args = ap.parse_args()
    for path in args.instances:
        for method in args.methods.split(","):
            bad, n = differing_channels(path, method)
            print(f"{path} {method}: {bad} of {n} channels differ", flush=True)
            if bad:
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
