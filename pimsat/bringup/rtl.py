"""Run a bundle's channels in the RTL model (rtl/) under Icarus Verilog and compare the result
files it writes with the bundle's golden files, line by line."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .manifest import BundleManifest
from .readme import iverilog_command

RTL_DIR = Path(__file__).resolve().parent.parent.parent / "rtl"
SOURCES = ("pim_channel.v", "tb_channel.v")
INCLUDES = ("fp.vh", "isa_fields.vh", "pim_decode.vh", "pim_issue.vh")
INSTALL_HINT = "apt-get install -y iverilog (make test installs it when it can)"


class RtlError(RuntimeError):
    """Icarus Verilog missing, or the model failed to compile or run; one line."""


@dataclass(frozen=True)
class ChannelRun:
    stem: str
    compared: tuple[str, ...]  # golden files compared
    first_difference: str | None  # "<file> line N: golden X, RTL Y"
    log: str  # the simulator's stdout

    @property
    def ok(self) -> bool:
        return self.first_difference is None

    def summary(self) -> str:
        if self.ok:
            return f"bit-identical to golden/ ({len(self.compared)} files)"
        return f"differs: {self.first_difference}"


def tools() -> tuple[str, str]:
    iverilog, vvp = shutil.which("iverilog"), shutil.which("vvp")
    if not iverilog or not vvp:
        raise RtlError(f"Icarus Verilog (iverilog, vvp) not found on PATH: {INSTALL_HINT}")
    return iverilog, vvp


def result_files(stem: str, banks: int) -> tuple[str, ...]:
    return (
        f"{stem}.summary.hex",
        f"{stem}.cmdlog.hex",
        f"{stem}.rdacc.hex",
        f"{stem}.rd.hex",
        *(f"{stem}_b{b}.final.hex" for b in range(banks)),
    )


_BUILT: dict[str, Path] = {}


def build(params: dict[str, int]) -> Path:
    """The compiled testbench for these parameters (cached per process by sources and parameters)."""
    iverilog, _ = tools()
    h = hashlib.sha256(repr(sorted(params.items())).encode())
    for s in (*SOURCES, *INCLUDES):
        h.update((RTL_DIR / s).read_bytes())
    key = h.hexdigest()[:16]
    if key not in _BUILT or not _BUILT[key].is_file():
        out = Path(tempfile.mkdtemp(prefix="pimsat-rtl-")) / "tb.vvp"
        cmd = [iverilog, *iverilog_command(params).split()[1:]]
        cmd[cmd.index("-o") + 1] = str(out)
        cmd = [str(RTL_DIR / c[4:]) if c.startswith("rtl/") else str(RTL_DIR) if c == "rtl" else c for c in cmd]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise RtlError(f"iverilog failed on rtl/: {(p.stderr or p.stdout).strip().splitlines()[0]}")
        _BUILT[key] = out
    return _BUILT[key]


def run_channel(bundle: Path, m: BundleManifest, stem: str, out: Path) -> ChannelRun:
    _, vvp = tools()
    exe = build(m.rtl_parameters)
    out.mkdir(parents=True, exist_ok=True)
    p = subprocess.run(
        [vvp, "-n", str(exe), f"+bundle={bundle}", f"+ch={stem}", f"+out={out}"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if p.returncode != 0 or "FINISHED" not in p.stdout:
        tail = (p.stdout + p.stderr).strip().splitlines()[-1:] or ["no output"]
        raise RtlError(f"{bundle}: channel {stem}: the RTL run failed: {tail[0]}")
    names = result_files(stem, m.rtl_parameters["NB"])
    first = None
    for name in names:
        first = compare_file(bundle / "golden" / name, out / name)
        if first:
            break
    return ChannelRun(stem, names, first, p.stdout)


def compare_file(golden: Path, got: Path) -> str | None:
    """None if the files hold the same values line by line, else where they first differ."""
    if not got.is_file():
        return f"{got.name}: not written by the RTL"
    want, have = _values(golden), _values(got)
    for i, (a, b) in enumerate(zip(want, have)):
        if a != b:
            return f"{golden.name} line {i + 1}: golden {a}, RTL {b}"
    if len(want) != len(have):
        return f"{golden.name}: golden has {len(want)} lines, RTL {len(have)}"
    return None


def _values(path: Path) -> list[str]:
    """The values of a hex file ($writememh may add // address comments)."""
    return [
        ln.strip().lower() for ln in path.read_text().splitlines() if ln.strip() and not ln.lstrip().startswith("//")
    ]


def run_bundle(bundle: Path, m: BundleManifest, out: Path | None = None) -> list[ChannelRun]:
    with tempfile.TemporaryDirectory(prefix="pimsat-rtl-out-") as tmp:
        base = out or Path(tmp)
        return [run_channel(bundle.resolve(), m, c.stem, base) for c in m.channels]
