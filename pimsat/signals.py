"""SIGINT, SIGTERM and SIGHUP at every phase: temporary files removed, one line on stderr,
exit status 128 + the signal (130, 143, 129).

The handler raises `Interrupted` (a KeyboardInterrupt), so the `except BaseException` cleanup
of hwmodel.atomic runs; inside one of its critical sections (the exchange) it waits for the
section's end. Python runs handlers only in the main thread between bytecodes, and CP-SAT's
search keeps the main thread in native code until it ends: a watchdog thread, woken through
signal.set_wakeup_fd, exits cleanly (lock released, the line printed, os._exit) when the
handler has not run GRACE seconds after a signal and no output is being written. OR-Tools is
told not to take SIGINT itself (catch_sigint_signal=False in solver/cpsat), and `ensure()`
re-installs the handlers after every solve anyway.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable

from hwmodel import atomic

SIGNALS = tuple(s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None)
GRACE = 1.0  # seconds the main thread has to take a signal before the watchdog exits for it


class Interrupted(KeyboardInterrupt):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


def message(e: BaseException) -> str:
    name = e.name if isinstance(e, Interrupted) else "SIGINT"
    note = getattr(e, "pimsat_output", None)
    return f"pimsat: interrupted ({name})" + (f"; {note}" if note else "")


def exit_code(e: BaseException) -> int:
    return e.exit_code if isinstance(e, Interrupted) else 130


class _State:
    installed = False
    raised = False
    handled = threading.Event()
    previous: dict[int, object] = {}
    wakeup: tuple[int, int] | None = None
    previous_fd = -1


def _raise(signum: int) -> None:
    _State.raised = True
    raise Interrupted(signum)


def _handler(signum: int, frame) -> None:
    _State.handled.set()
    if _State.raised:  # already on the way out: let the cleanup finish
        return
    if atomic.in_critical():
        atomic.defer(lambda: _raise(signum))
        return
    _raise(signum)


def _watch(rfd: int) -> None:
    with contextlib.suppress(AttributeError, ValueError, OSError):
        signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)  # signals go to the main thread
    while True:
        try:
            data = os.read(rfd, 16)
        except OSError:
            data = b""
        if not data:  # restore() closed the write end
            with contextlib.suppress(OSError):
                os.close(rfd)
            return
        for signum in data:
            if signum not in SIGNALS:
                continue
            if _State.handled.wait(GRACE) or atomic.writing():
                continue  # the main thread has it (or will, once its write step returns)
            e = Interrupted(signum)
            if sys.stdout.isatty():  # a live progress line hid the cursor
                sys.stdout.write("\x1b[?25h\n")
                sys.stdout.flush()
            sys.stderr.write(message(e) + "\n")
            sys.stderr.flush()
            atomic.release_all_locks()
            os._exit(e.exit_code)


def install() -> Callable[[], None]:
    """Install the handlers (main thread only); returns a function restoring the previous ones."""
    if _State.installed or threading.current_thread() is not threading.main_thread():
        return lambda: None
    _State.installed, _State.raised = True, False
    _State.handled.clear()
    _State.previous = {s: signal.signal(s, _handler) for s in SIGNALS}
    try:
        r, w = os.pipe()
        os.set_blocking(w, False)
        _State.previous_fd = signal.set_wakeup_fd(w)
        _State.wakeup = (r, w)
        threading.Thread(target=_watch, args=(r,), name="pimsat-signals", daemon=True).start()
    except (OSError, ValueError):
        _State.wakeup = None
    return restore


def ensure() -> None:
    """Re-install the handlers (a library may have replaced them at the C level)."""
    if _State.installed:
        for s in SIGNALS:
            signal.signal(s, _handler)


def restore() -> None:
    if not _State.installed:
        return
    for s, h in _State.previous.items():
        signal.signal(s, h)  # type: ignore[arg-type]
    if _State.wakeup is not None:
        signal.set_wakeup_fd(_State.previous_fd)
        with contextlib.suppress(OSError):
            os.close(_State.wakeup[1])  # the watchdog reads EOF, closes its end and ends
        _State.wakeup = None
    _State.installed = False
