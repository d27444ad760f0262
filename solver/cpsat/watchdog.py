"""The wall-clock limit of a CP-SAT solve, applied only where CP-SAT can stop without aborting.

OR-Tools 9.15 aborts the whole process (a CHECK failure in PostsolveResponse: "solution->size() ==
postsolve_mapping.size() (0 vs. N)") when a search with `interleave_search`, two or more workers
and a complete, feasible hint is stopped between the end of presolve and the start of the search,
while it loads the presolved model and reports the hint as its first solution. Its own
`max_time_in_seconds` expiring there aborts the same way as `StopSearch`. Measured on a 9-task
problem (tests/solver: `random_problem(7, n_jobs=9, n_groups=3, refresh=True)`): a stop issued
when the log prints "Preloading model." aborts every time; a stop at "Presolve summary" or at
"Starting deterministic search" returns normally; without the hint, without interleaving or with
one worker, no stop aborts. `python bench/cpsat_stop_window.py` repeats the measurement. Under
load the window moves, so a short time limit could hit it (CI did: a 0.05 s limit on a busy
machine killed a test worker).

So `solve_cpsat` gives CP-SAT no wall-clock limit of its own. This watchdog is the limit: at the
deadline it calls `stop_search`, except inside that window, which it reads from CP-SAT's log (from
"Presolve summary" to "Starting ... search"). A stop that falls inside is issued when the window
closes, at most `max_defer` seconds later (then regardless: a later OR-Tools may word its log
differently). The deferral is reported (`deferred_s`). A stop requested before CP-SAT has printed
its first line waits for that line too: `CpSolver.stop_search` before `solve` has created its
search does nothing, so a deadline that passed while the model was being built would be lost.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable

WINDOW_OPENS = re.compile(r"^Presolve summary")
WINDOW_CLOSES = re.compile(r"^Starting (deterministic )?search")


class Watchdog:
    """Stops a solve at `deadline` (a `time.perf_counter()` instant), outside the unsafe window.

    Feed it CP-SAT's log lines (`on_log`, the solver's `log_callback`); `start()` before the
    solve, `cancel()` after it. `request_stop()` never blocks: before CP-SAT's first line or
    inside the window it leaves the stop pending, and the next line outside the window (or the
    timer, `max_defer` later) issues it.
    """

    def __init__(
        self,
        stop: Callable[[], None],
        deadline: float,
        max_defer: float,
        echo: Callable[[str], None] | None = None,
    ):
        self._stop = stop
        self.deadline = deadline
        self.max_defer = max_defer
        self._echo = echo
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._started = False  # CP-SAT has printed a line: its search exists, a stop reaches it
        self._in_window = False
        self._pending_since: float | None = None
        self.fired = False  # a stop was issued (by the deadline or a request)
        self.deferred_s = 0.0  # how long the stop waited (for CP-SAT's first line or the window)
        self.waited_for_window = False  # it was requested inside the window
        self.forced = False  # issued max_defer after the request, still waiting (window or first line)
        self._thread: threading.Thread | None = None

    # ---- CP-SAT's log
    def on_log(self, line: str) -> None:
        if self._echo is not None:
            self._echo(line)
        with self._lock:
            self._started = True
            if WINDOW_OPENS.match(line):
                self._in_window = True
            elif WINDOW_CLOSES.match(line):
                self._in_window = False
            pending = None
            if not self._in_window:
                pending, self._pending_since = self._pending_since, None
        if pending is not None:
            self._issue(time.perf_counter() - pending)

    # ---- stopping
    def request_stop(self) -> None:
        with self._lock:
            if self.fired or self._pending_since is not None:
                return
            if self._in_window or not self._started:
                self._pending_since = time.perf_counter()
                self.waited_for_window = self._in_window
                return
        self._issue(0.0)

    def _issue(self, deferred: float, forced: bool = False) -> None:
        with self._lock:
            if self.fired:
                return
            self.fired = True
            self.deferred_s = deferred
            self.forced = forced
        self._stop()

    def _run(self) -> None:
        if self._done.wait(max(0.0, self.deadline - time.perf_counter())):
            return
        self.request_stop()
        with self._lock:
            pending = self._pending_since
        if pending is None:
            return
        if self._done.wait(max(0.0, pending + self.max_defer - time.perf_counter())):
            return
        with self._lock:
            still = self._pending_since
            self._pending_since = None
        if still is not None:
            self._issue(time.perf_counter() - still, forced=True)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="cpsat-watchdog", daemon=True)
        self._thread.start()

    def cancel(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
