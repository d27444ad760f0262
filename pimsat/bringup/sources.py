"""Where a bundle's program comes from: an instance file, compiled now, or a `pimsat solve --out`
folder, its recorded streams (both -> bundle.Compiled)."""

from __future__ import annotations

from pathlib import Path


def from_solve_folder(folder: Path):
    """A `pimsat solve --out` folder (or its streams/ folder) -> bringup.bundle.Compiled."""
    from hwmodel.streams_io import MANIFEST, read_streams
    from pimsat.stream_inputs import manifest_inputs

    from .bundle import BundleError, Compiled

    d = folder / "streams" if (folder / "streams" / MANIFEST).is_file() else folder
    if not (d / MANIFEST).is_file():
        raise BundleError(
            f"{folder}: neither an instance file nor a `pimsat solve --out` folder (no streams/{MANIFEST})"
        )
    streams, manifest = read_streams(d)
    hw, program, seed = manifest_inputs(d, manifest, None, [])
    if program is None:
        raise BundleError(f"{d / MANIFEST}: program: not recorded; export the instance instead")
    compiled = manifest.get("compiled")
    method = compiled.get("method") if isinstance(compiled, dict) else None
    instance = manifest.get("instance") if isinstance(manifest.get("instance"), dict) else {}
    return Compiled(hw, program, streams, seed, instance, method)


def from_instance(path: str, method: str, time_limit: float):
    from pimsat.instance import load_instance
    from pimsat.pipeline import SolveOptions, run
    from solver.problem import Method

    from .bundle import Compiled
    from .fit import check_fits

    inst = load_instance(path)
    check_fits(inst.build_hardware([], None), path)  # refused before the solve, not after
    r = run(inst, SolveOptions(method=Method(method), time_limit=time_limit, functional=True, record=True))
    return Compiled(r.hardware, r.program, r.compiled.streams, inst.seed, inst.model_dump(), str(r.solution.method))
