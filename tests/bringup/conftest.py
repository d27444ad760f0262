"""Bring-up fixtures: the fpga-tier bundles (exported once per test session, shared by the xdist
workers through a lock), and Icarus Verilog, which under CI (CI=true) must be there: a missing
simulator fails the RTL tests there and skips them, with one line, everywhere else."""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

import pytest

from pimsat.bringup.bundle import check_bundle, export
from pimsat.bringup.rtl import INSTALL_HINT
from pimsat.bringup.sources import from_instance

ROOT = Path(__file__).resolve().parent.parent.parent
FPGA = sorted((ROOT / "instances" / "fpga").glob("*.yaml"))


def require_iverilog() -> None:
    """Called when the RTL tests are collected: skip the whole module with one line, or, under
    CI, fail it (a collection error)."""
    if shutil.which("iverilog") and shutil.which("vvp"):
        return
    why = f"Icarus Verilog (iverilog, vvp) not found: {INSTALL_HINT}"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI=true: the RTL tests must run, and {why}", pytrace=False)
    pytest.skip(f"RTL tests: {why}", allow_module_level=True)


@pytest.fixture(scope="session")
def bundle_dir(tmp_path_factory) -> Path:
    base = tmp_path_factory.getbasetemp()
    # under xdist each worker's base is popen-gwN inside the session's folder, which they share
    d = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "bringup-bundles"
    d.mkdir(exist_ok=True)
    return d


def make_bundle(root: Path, instance: Path) -> Path:
    """The bundle of `instance` under `root`, exported by the first worker that asks for it."""
    out = root / instance.stem
    with open(root / f"{instance.stem}.fixture-lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "manifest.json").is_file():
            export(from_instance(str(instance), "cpsat", 60.0), out, str(instance))
    check_bundle(out)
    return out


@pytest.fixture(scope="session", params=FPGA, ids=[p.stem for p in FPGA])
def bundle(request, bundle_dir) -> Path:
    return make_bundle(bundle_dir, request.param)


@pytest.fixture(scope="session")
def gemv_bundle(bundle_dir) -> Path:
    return make_bundle(bundle_dir, ROOT / "instances" / "fpga" / "gemv-64x128-fpga.yaml")


def copy_bundle(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def pytest_terminal_summary(terminalreporter) -> None:
    """One line at the end of the run when the RTL tests were skipped (not only under -rs)."""
    if not (shutil.which("iverilog") and shutil.which("vvp")):
        terminalreporter.write_line(f"bring-up: RTL tests skipped: Icarus Verilog not found: {INSTALL_HINT}")
