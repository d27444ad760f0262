"""Bring-up commands (issue 17): export-fpga, check-bundle, rtl-run; `schema bundle`."""

from __future__ import annotations

import json
from pathlib import Path

import click

from . import cli_info  # noqa: F401  (its `schema` command is extended below)
from .cli_base import CompilerError, UserError, console, guard, main
from .options import nonempty


def _bundle_errors(fn):
    """guard, plus the bring-up errors: a bad bundle or target is the user's (exit 2), golden
    results that disagree with the simulator are pimsat's (exit 3)."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from .bringup.bundle import BundleError
        from .bringup.golden import GoldenMismatch
        from .bringup.rtl import RtlError

        try:
            return fn(*args, **kwargs)
        except (BundleError, RtlError) as e:
            raise UserError(str(e)) from None
        except GoldenMismatch as e:
            raise CompilerError(str(e)) from None

    return guard(wrapper)


def _lock_target(out: str) -> None:
    """Refuse an --out inside a file (one line), then hold the output's lock for the command."""
    from hwmodel.atomic import output_lock

    for parent in Path(out).absolute().parents:
        if parent.exists() and not parent.is_dir():
            raise UserError(f"{parent}: a file, not a folder (--out {out})")
    click.get_current_context().with_resource(output_lock(out))


def _kinds():
    from .bringup.testgen import GenKind

    return list(GenKind)


@main.command("export-fpga")
@click.argument("source", type=click.Path())
@click.option("--out", "out", type=click.Path(), required=True, callback=nonempty, help="The bundle folder to write.")
@click.option("--method", type=click.Choice(["naive", "greedy", "cpsat"]), default="cpsat", show_default=True)
@click.option("--time-limit", type=float, default=60.0, show_default=True, help="Solver wall-clock guard (s).")
@_bundle_errors
def export_fpga(source, out, method, time_limit) -> None:
    """Write an FPGA bring-up bundle for SOURCE (an instance file, or a `pimsat solve --out` folder):
    memory and instruction images, golden results, manifest.json."""
    from .bringup.bundle import export
    from .bringup.sources import from_instance, from_solve_folder

    _lock_target(out)
    src = Path(source)
    compiled = from_solve_folder(src) if src.is_dir() else from_instance(source, method, time_limit)
    m = export(compiled, Path(out), source)
    console.print(
        f"wrote {out}: {len(m.channels)} channel(s), {m.golden.cycles:,} cycles, "
        f"{sum(c.rdacc_values for c in m.channels):,} RDACC values, {len(m.files)} files"
    )


def _bundles(folder: Path) -> list[Path]:
    """A bundle, or every bundle of a `pimsat testgen` folder (its index.json)."""
    from .bringup.bundle import BundleError
    from .bringup.manifest import MANIFEST
    from .bringup.suite import INDEX

    if (folder / MANIFEST).is_file() or not (folder / INDEX).is_file():
        return [folder]
    try:
        tests = json.loads((folder / INDEX).read_text())["tests"]
        return [folder / t["name"] for t in tests]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise BundleError(f"{folder / INDEX}: not a pimsat testgen index ({e})") from None


@main.command("check-bundle")
@click.argument("bundle", type=click.Path())
@_bundle_errors
def check_bundle(bundle) -> None:
    """Check a bring-up bundle (or every bundle of a testgen folder): manifest schema, and the
    size and sha256 of every file."""
    from .bringup.bundle import check_bundle as check

    paths = _bundles(Path(bundle))
    for p in paths:
        m = check(p)
    if len(paths) == 1:
        console.print(f"{bundle}: ok ({len(m.files)} files, {len(m.channels)} channel(s), ISA {m.isa_version})")
    else:
        console.print(f"{bundle}: ok ({len(paths)} bundles)")


@main.command("testgen")
@click.option("--kind", type=click.Choice([k.value for k in _kinds()]), required=True)
@click.option(
    "--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Data seed; random: first program's."
)
@click.option(
    "--count", type=click.IntRange(min=1), default=None, help="Tests to write (random: default 50; others: all)."
)
@click.option(
    "--out", "out", type=click.Path(), required=True, callback=nonempty, help="The folder of bundles to write."
)
@_bundle_errors
def testgen(kind, seed, count, out) -> None:
    """Generate bring-up tests, each a bundle: directed (per instruction, mode and timing row),
    constrained-random, or the compiled fpga-tier instances; every one simulated when generated."""
    from .bringup.bundle import export
    from .bringup.suite import generate, write_tests
    from .bringup.testgen import GenKind

    _lock_target(out)
    target = Path(out)
    if target.exists() and (not target.is_dir() or (any(target.iterdir()) and not (target / "index.json").is_file())):
        raise UserError(f"{out}: exists and is not a testgen folder (no index.json); refusing to replace it")
    rows = write_tests(generate(GenKind(kind), seed, count), target, export)
    loose = [r["name"] for r in rows if (r["test"] or {}).get("binds") is False]
    note = f"; {len(loose)} timing rows that another row dominates on this hardware" if loose else ""
    console.print(f"wrote {out}: {len(rows)} {kind} tests{note}")


@main.command("rtl-run")
@click.argument("bundle", type=click.Path())
@click.option(
    "--out", "out", type=click.Path(), default=None, callback=nonempty, help="Keep the RTL's result files here."
)
@_bundle_errors
def rtl_run(bundle, out) -> None:
    """Run every channel of BUNDLE in the RTL model under Icarus Verilog; compare with golden/."""
    from .bringup.bundle import check_bundle as check
    from .bringup.rtl import run_bundle

    for b in _bundles(Path(bundle)):
        m = check(b)
        for r in run_bundle(b, m, Path(out) / b.name if out else None):
            console.print(f"{b.name} {r.stem}: {r.summary()}")
            if not r.ok:
                raise UserError(f"{b}: channel {r.stem}: RTL results differ from golden/: {r.first_difference}")


# `pimsat schema` gains `bundle`; instance and hardware stay with the command cli_info defines
_schema = main.commands["schema"]


@main.command("schema")
@click.argument("what", type=click.Choice(["instance", "hardware", "bundle"]), default="instance")
@click.pass_context
def schema(ctx, what) -> None:
    """Print the JSON Schema of instance or hardware files, or of a bring-up bundle's manifest."""
    if what != "bundle":
        return ctx.invoke(_schema, what=what)
    from .bringup.manifest import BundleManifest

    click.echo(json.dumps(BundleManifest.model_json_schema(), indent=2))
