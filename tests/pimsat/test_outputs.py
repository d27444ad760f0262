"""Outputs: `--out DIR` is always the previous output or the new complete one, whatever signal
arrives between the steps of writing it; no hidden folder is left behind (a SIGKILLed writer's
temporaries are removed by the next run); a second writer is refused; the user's umask is
honoured; a full disk names the file.

The signal matrix drives hwmodel.atomic.write_dir_atomically in a small subprocess (a third of a
second each) with pimsat's handlers installed; a few `pimsat solve` runs check the CLI path end
to end, including after a real CP-SAT solve (OR-Tools used to re-install the default SIGINT
action, so Ctrl-C killed pimsat with no message and no cleanup).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwmodel import atomic
from pimsat.cli import main

ROOT = Path(__file__).resolve().parents[2]
GEMV = ROOT / "instances" / "fpga" / "gemv-64x128-fpga.yaml"
ATTN = ROOT / "instances" / "fpga" / "attention-h2-d16-c31-fpga.yaml"  # CP-SAT really searches
PIMSAT = [sys.executable, "-m", "pimsat.cli"]

DRIVER = """
import json, sys
from pathlib import Path
from hwmodel import atomic
from pimsat import signals
signals.install()
out, tag = Path(sys.argv[1]), sys.argv[2]
atomic.EXCHANGE = sys.argv[3] == "exchange"
def build(tmp):
    (tmp / "report.json").write_text(json.dumps({"tag": tag}))
    atomic.write_dir_atomically(tmp / "streams", lambda t: (t / "ch00.bin").write_bytes(tag.encode() * 100))
try:
    atomic.write_dir_atomically(out, build)
except KeyboardInterrupt as e:
    print(signals.message(e), file=sys.stderr)
    sys.exit(signals.exit_code(e))
"""


def drive(out: Path, tag: str, pause: str | None = None, mode: str = "exchange"):
    env = {**os.environ, "PIMSAT_TEST_PAUSE_AT": pause or ""}
    return subprocess.run(
        [sys.executable, "-c", DRIVER, str(out), tag, mode],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )


def hidden(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def tag_of(out: Path) -> str:
    """The tag of a complete driver output (asserts it is complete)."""
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == ["report.json", "streams", "streams/ch00.bin"]
    tag = json.loads((out / "report.json").read_text())["tag"]
    assert (out / "streams" / "ch00.bin").read_bytes() == tag.encode() * 100
    return tag


SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGKILL]


@pytest.mark.parametrize("step", atomic.STEPS)
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_signal_between_steps(tmp_path, step, sig):
    out = tmp_path / "run"
    assert drive(out, "old").returncode == 0 and tag_of(out) == "old"
    r = drive(out, "new", f"{step}:{sig.name}")
    if sig == signal.SIGKILL:
        assert r.returncode == -signal.SIGKILL
        assert tag_of(out) in ("old", "new")
        assert hidden(tmp_path), "a SIGKILLed writer leaves its temporaries (else this test is void)"
        r = drive(out, "again")  # the next writer removes the dead one's temporaries
        assert r.returncode == 0, r.stderr
        assert tag_of(out) == "again"
    else:
        assert r.returncode == 128 + sig, r.stderr
        written = step in ("after_exchange", "before_remove_old")
        assert r.stderr == f"pimsat: interrupted ({sig.name}); {out} {'written' if written else 'left unchanged'}\n"
        assert tag_of(out) == ("new" if written else "old")
    assert hidden(tmp_path) == []


@pytest.mark.parametrize("step", ["before_exchange", "after_exchange"])
def test_signal_with_two_rename_fallback(tmp_path, step):
    out = tmp_path / "run"
    assert drive(out, "old", mode="fallback").returncode == 0
    r = drive(out, "new", f"{step}:SIGTERM", mode="fallback")
    assert r.returncode == 143 and tag_of(out) == ("new" if step == "after_exchange" else "old")
    assert hidden(tmp_path) == []


def test_exchange_swaps_in_one_step(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "x").write_text("a")
    (b / "x").write_text("b")
    if not atomic.exchange(a, b):
        pytest.skip("renameat2(RENAME_EXCHANGE) unsupported here")
    assert (a / "x").read_text() == "b" and (b / "x").read_text() == "a"


# --- the CLI end to end -------------------------------------------------------------------------
def solve(instance, out, *extra, pause=None, method="naive"):
    env = {**os.environ, "PIMSAT_TEST_PAUSE_AT": pause or ""}
    return subprocess.run(
        [*PIMSAT, "solve", str(instance), "--method", method, "--out", str(out), "--json", *extra],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def previous_output(out: Path) -> bytes:
    out.mkdir()
    (out / "report.json").write_text('{"previous": true}\n')
    return (out / "report.json").read_bytes()


def test_cli_sigint_after_a_cpsat_solve_leaves_dir_unchanged(tmp_path):
    out = tmp_path / "run"
    before = previous_output(out)
    r = solve(ATTN, out, "--time-limit", "5", pause="before_exchange:SIGINT", method="cpsat")
    assert r.returncode == 130, (r.returncode, r.stderr)
    assert r.stderr == f"pimsat: interrupted (SIGINT); {out} left unchanged\n"
    assert (out / "report.json").read_bytes() == before and hidden(tmp_path) == []


def test_cli_sigkill_then_next_run_cleans_up(tmp_path):
    out = tmp_path / "run"
    previous_output(out)
    r = solve(GEMV, out, pause="before_remove_old:SIGKILL")
    assert r.returncode == -signal.SIGKILL
    assert json.loads((out / "report.json").read_text())["method"] == "naive"  # the new one, complete
    assert any(n.startswith(".run.tmp-") for n in hidden(tmp_path))
    r = solve(GEMV, out)
    assert r.returncode == 0, r.stderr
    assert hidden(tmp_path) == [] and (out / "streams" / "manifest.json").exists()


WATCHED = """
import sys
from ortools.sat.python import cp_model
from pimsat import signals
signals.install()
m = cp_model.CpModel()
xs = [m.new_int_var(0, 1600, f"x{i}") for i in range(40)]
m.add_all_different(xs)
m.add_all_different([xs[i] - xs[j] for i in range(40) for j in range(i + 1, 40)][:300])
m.minimize(sum(xs))
s = cp_model.CpSolver()
s.parameters.max_time_in_seconds = 30
s.parameters.num_workers = 2
s.parameters.catch_sigint_signal = False
print("solving", flush=True)
try:
    s.solve(m)
except KeyboardInterrupt as e:
    print(signals.message(e), file=sys.stderr)
    sys.exit(signals.exit_code(e))
print("solve ended", flush=True)
"""


def test_sigint_during_a_native_solve_exits_promptly():
    """CP-SAT keeps the main thread in native code: Python's handler would wait for the
    search to end (30 s here); the watchdog exits cleanly within about a second."""
    p = subprocess.Popen(
        [sys.executable, "-c", WATCHED], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
    )
    assert p.stdout.readline() == "solving\n"
    time.sleep(0.3)
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130 and err == "pimsat: interrupted (SIGINT)\n"
    assert time.monotonic() - t0 < 5


# --- lock, umask, full disk (in process) ------------------------------------------------------
def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_second_writer_is_refused(tmp_path):
    out = tmp_path / "run"
    before = previous_output(out)
    fd = os.open(atomic.lock_path(out), os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        r = invoke("solve", GEMV, "--method", "naive", "--out", out)
    finally:
        os.close(fd)
        os.unlink(atomic.lock_path(out))
    assert r.exit_code == 2
    assert r.stderr == f"pimsat: error: {out}: another pimsat is writing this output folder\n"
    assert (out / "report.json").read_bytes() == before and hidden(tmp_path) == []


def test_lock_is_released_and_removed(tmp_path):
    out = tmp_path / "run"
    with atomic.output_lock(out):
        assert atomic.lock_path(out).exists()
        with atomic.output_lock(out):  # re-entrant in one process
            pass
    assert not atomic.lock_path(out).exists()


def test_outputs_follow_the_umask(tmp_path):
    out = tmp_path / "run"
    old = os.umask(0o027)
    try:
        r = invoke("solve", GEMV, "--method", "naive", "--out", out, "--json")
    finally:
        os.umask(old)
    assert r.exit_code == 0, r.stderr
    for p in [out, *out.rglob("*")]:
        want = 0o750 if p.is_dir() else 0o640
        assert p.stat().st_mode & 0o777 == want, (p, oct(p.stat().st_mode))


def _full_disk_at(monkeypatch, name):
    real = os.fsync

    def fsync(fd):
        if os.readlink(f"/proc/self/fd/{fd}").endswith(name):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # as write(2) reports it: no file name
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


def test_full_disk_names_the_file(tmp_path, monkeypatch):
    out = tmp_path / "run"
    before = previous_output(out)
    _full_disk_at(monkeypatch, "/ch00.bin")
    r = invoke("solve", GEMV, "--method", "naive", "--out", out)
    assert r.exit_code == 2
    assert r.stderr == f"pimsat: error: {out}/streams/ch00.bin: No space left on device\n"
    assert (out / "report.json").read_bytes() == before and hidden(tmp_path) == []


def test_full_disk_without_any_file_name_names_the_folder(tmp_path, monkeypatch):
    out = tmp_path / "run"

    def write_text(self, *a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Path, "write_text", write_text)
    r = invoke("solve", GEMV, "--method", "naive", "--out", out)
    assert r.exit_code == 2
    assert r.stderr == f"pimsat: error: {out}/report.json: No space left on device\n"
    assert not out.exists() and hidden(tmp_path) == []
