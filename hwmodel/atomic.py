"""Atomic output, for every file and folder pimsat writes: a temporary sibling is written, then
swapped in; the target is always either the old or the new complete one.

A folder `OUT` is written as follows, under an exclusive lock `.OUT.lock` beside it (flock, so a
killed writer's lock dies with it; the file is removed on release):

1. stale temporary siblings `.OUT.tmp-PID-*` / `.OUT.old-PID-*` whose process is gone are
   removed (a writer killed by SIGKILL cannot clean up after itself);
2. the new folder is built in `.OUT.tmp-PID-*` and given the user's umask (mkdtemp makes 0700);
3. on Linux, renameat2(RENAME_EXCHANGE) swaps it with OUT in one step and the old tree, now at
   the temporary name, is removed; where the exchange is not supported (ENOSYS / EINVAL, e.g.
   some filesystems) OUT is moved aside to `.OUT.old-PID-*/d` and the new one renamed in.

Every OSError leaving the writer names a path: the target's, never the temporary one.
PIMSAT_TEST_PAUSE_AT=STEP:ACTION (STEP one of STEPS; ACTION a signal name such as SIGINT, or
sleep=SECONDS) lets the tests interrupt a write between its steps.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import platform
import re
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

STEPS = ("started", "built", "before_exchange", "after_exchange", "before_remove_old")
_AT_FDCWD, _RENAME_EXCHANGE = -100, 2
_SYS_RENAMEAT2 = {"x86_64": 316, "amd64": 316, "aarch64": 276, "arm64": 276}
EXCHANGE = True  # tests set False to exercise the two-rename fallback


def umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# --- signals: critical sections --------------------------------------------------------------
# A signal handler (pimsat.signals) that finds a critical section open defers its action to the
# section's end, so that "swapped" and "where the old tree is" are never observed half-done.
_critical = [0]
_deferred: list[Callable[[], None]] = []
_writing = [0]  # folders or files being written now: a signal will be handled in Python shortly
_dirs = [0]  # nesting of write_dir_atomically (a solve's streams/ is written inside its folder)


def in_critical() -> bool:
    return _critical[0] > 0


def defer(action: Callable[[], None]) -> None:
    _deferred.append(action)


def writing() -> bool:
    return _writing[0] > 0


@contextlib.contextmanager
def critical() -> Iterator[None]:
    _critical[0] += 1
    try:
        yield
    finally:
        _critical[0] -= 1
    if not _critical[0] and _deferred:
        actions = _deferred[:]
        _deferred.clear()
        for action in actions:
            action()


def _pause(step: str) -> None:
    """The test hook, at the steps of the outermost folder being written."""
    spec = os.environ.get("PIMSAT_TEST_PAUSE_AT", "")
    at, _, action = spec.partition(":")
    if at != step or _dirs[0] != 1:
        return
    if action.startswith("sleep="):
        time.sleep(float(action.removeprefix("sleep=")))
        return
    os.kill(os.getpid(), getattr(signal, action))
    time.sleep(5)  # a handler that raises ends this; SIGKILL never returns


# --- the exchange --------------------------------------------------------------------------------
def _renameat2() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    fn = getattr(libc, "renameat2", None)
    if fn is not None:
        fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        fn.restype = ctypes.c_int
        return fn
    number = _SYS_RENAMEAT2.get(platform.machine().lower())
    if number is None:
        return None
    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    return lambda a, p, b, q, flags: syscall(
        ctypes.c_long(number), ctypes.c_int(a), p, ctypes.c_int(b), q, ctypes.c_uint(flags)
    )


def exchange(a: Path, b: Path) -> bool:
    """Swap the paths a and b in one step; False if the system or filesystem cannot."""
    fn = _renameat2() if EXCHANGE else None
    if fn is None:
        return False
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
        return False
    raise OSError(err, os.strerror(err), str(b))


# --- the lock ----------------------------------------------------------------------------------
class OutputLocked(OSError):
    """Another process holds the lock of this output."""


_held: dict[str, list[int]] = {}  # lock path -> [fd, depth]


def lock_path(out: str | os.PathLike[str]) -> Path:
    out = Path(os.path.abspath(out))
    return out.parent / f".{out.name}.lock"


@contextlib.contextmanager
def output_lock(out: str | os.PathLike[str]) -> Iterator[None]:
    """Hold the exclusive lock on writing `out` (re-entrant within this process)."""
    path = lock_path(out)
    key = str(path)
    if key in _held:
        _held[key][1] += 1
        try:
            yield
        finally:
            _held[key][1] -= 1
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise OutputLocked(errno.EBUSY, "another pimsat is writing this output folder", str(out)) from None
        try:  # a holder that released removed the file: lock the one at the path
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    _held[key] = [fd, 1]
    try:
        yield
    finally:
        release_lock(key)


def release_lock(key: str) -> None:
    fd, _ = _held.pop(key, (None, 0))
    if fd is not None:
        with contextlib.suppress(OSError):
            os.unlink(key)
        os.close(fd)


def release_all_locks() -> None:
    for key in list(_held):
        release_lock(key)


# --- stale temporaries -------------------------------------------------------------------------
def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale(out: Path) -> None:
    """Remove `.OUT.tmp-PID-*` / `.OUT.old-PID-*` siblings whose process is gone."""
    pattern = re.compile(rf"^\.{re.escape(out.name)}\.(?:tmp|old)-(\d+)-")
    with contextlib.suppress(OSError):
        for entry in os.scandir(out.parent):
            m = pattern.match(entry.name)
            if m and int(m[1]) != os.getpid() and not _alive(int(m[1])):
                shutil.rmtree(entry.path, ignore_errors=True)


# --- writers -----------------------------------------------------------------------------------
def name_path(e: OSError, path: str | os.PathLike[str]) -> None:
    """Make an OSError that names no file (a full disk's write(2)) name `path`."""
    if e.filename not in (None, ""):
        return
    if e.errno is not None:
        e.filename = str(path)
    elif len(e.args) == 1 and not str(e.args[0]).startswith(f"{path}:"):
        e.args = (f"{path}: {e.args[0]}",)


def _name_target(e: OSError, tmp: Path, out: Path) -> None:
    """Point an OSError at the target instead of the temporary folder (or at the target at all)."""
    for attr in ("filename", "filename2"):
        name = getattr(e, attr)
        if isinstance(name, str) and name.startswith(str(tmp)):
            setattr(e, attr, str(out) + name[len(str(tmp)) :])
    if e.errno is None:
        _retarget_message(e, tmp, out)
    name_path(e, out)


def _retarget_message(e: BaseException, tmp: Path, out: Path) -> None:
    if len(e.args) == 1 and isinstance(e.args[0], str) and str(tmp) in e.args[0]:
        e.args = (e.args[0].replace(str(tmp), str(out)),)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], binary: bool) -> Iterator[IO[Any]]:
    """Open a temporary file beside `path`; on success rename it over `path`, on error remove it."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    _writing[0] += 1
    try:
        if binary:
            f: IO[Any] = os.fdopen(fd, "wb")
        else:
            f = os.fdopen(fd, "w", encoding="utf-8", newline="\n")
        with f:
            yield f
        os.chmod(tmp, 0o666 & ~umask())
        os.replace(tmp, target)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            _name_target(e, Path(tmp), target)
        raise
    finally:
        _writing[0] -= 1


def write_text(path: Path, text: str) -> None:
    """Write a file inside a folder being built; an OSError names the file."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        name_path(e, path)
        raise


def write_dir_atomically(out: Path, build: Callable[[Path], Any]) -> Path:
    """Build a directory in a temporary sibling, then swap it in: `out` is either the complete
    new directory or (on any failure or signal) left exactly as it was. A KeyboardInterrupt
    leaving here carries `pimsat_output`: what became of `out`."""
    shown = Path(out)  # how messages name it: as the caller spelled it
    out = Path(os.path.abspath(out))
    out.parent.mkdir(parents=True, exist_ok=True)
    with output_lock(shown):
        _writing[0] += 1
        _dirs[0] += 1
        try:
            return _write_dir(out, shown, build)
        finally:
            _writing[0] -= 1
            _dirs[0] -= 1


def _write_dir(out: Path, shown: Path, build: Callable[[Path], Any]) -> Path:
    parent = out.parent
    remove_stale(out)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-{os.getpid()}-", dir=parent))
    old: Path | None = None  # the fallback's parking folder
    swapped = False
    try:
        _pause("started")
        build(tmp)
        _pause("built")
        os.chmod(tmp, 0o777 & ~umask())
        _pause("before_exchange")
        with critical():
            if not out.exists():
                os.replace(tmp, out)
                swapped = True
            elif exchange(tmp, out):
                swapped = True  # the old tree is now at `tmp`
            else:
                old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-{os.getpid()}-", dir=parent))
                os.replace(out, old / "d")
                try:
                    os.replace(tmp, out)
                except BaseException:
                    os.replace(old / "d", out)
                    raise
                swapped = True
        _pause("after_exchange")
        _pause("before_remove_old")
        shutil.rmtree(old if old is not None else tmp, ignore_errors=True)
    except BaseException as e:
        with critical():
            for leftover in (tmp, old):
                if leftover is not None:
                    shutil.rmtree(leftover, ignore_errors=True)
        if isinstance(e, OSError):
            _name_target(e, tmp, shown)
        elif isinstance(e, Exception):
            _retarget_message(e, tmp, shown)
        elif isinstance(e, KeyboardInterrupt):
            e.pimsat_output = f"{shown} {'written' if swapped else 'left unchanged'}"  # type: ignore[attr-defined]
        raise
    return out
