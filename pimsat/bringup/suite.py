"""A folder of generated tests: the tests of one kind, each exported as a bundle, and index.json."""

from __future__ import annotations

import json
from pathlib import Path

from hwmodel.atomic import write_dir_atomically, write_text

from .bundle import Compiled
from .directed import directed_cases
from .sources import from_instance
from .testgen import GeneratedTest, GenKind, random_case

INDEX = "index.json"


def generate(kind: GenKind, seed: int, count: int | None) -> list[GeneratedTest | Compiled]:
    """The tests of one kind: directed (all, or the first `count`; data from `seed`), random
    (`count` programs, seeds seed, seed + 1, ...), instances (the fpga tier, compiled)."""
    if kind is GenKind.RANDOM:
        return [random_case(seed + i) for i in range(50 if count is None else count)]
    if kind is GenKind.DIRECTED:
        cases = directed_cases()[:count]
        for c in cases:
            c.seed = seed
        return cases

    root = Path(__file__).resolve().parent.parent.parent / "instances" / "fpga"
    out = []
    for path in sorted(root.glob("*.yaml"))[:count]:
        c = from_instance(str(path), "cpsat", 60.0)
        out.append(Compiled(c.hardware, c.program, c.streams, c.seed, c.instance, c.method, {"kind": kind.value}))
    return out


def write_tests(tests: list, out, export) -> list[dict]:
    """Export every test as a bundle under `out` (one folder, written atomically) with index.json."""

    rows: list[dict] = []

    def build(tmp: Path) -> None:
        for t in tests:
            c = t.compiled() if isinstance(t, GeneratedTest) else t
            name = t.name if isinstance(t, GeneratedTest) else c.instance["name"]
            m = export(c, tmp / name, name)
            rows.append({"name": name, "cycles": m.golden.cycles, "test": m.test})
        write_text(tmp / INDEX, json.dumps({"format": "pimsat-testgen", "tests": rows}, indent=1) + "\n")

    write_dir_atomically(Path(out), build)
    return rows
