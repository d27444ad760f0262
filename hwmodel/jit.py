"""Optional numba compilation of the hot loops (the channel kernel, the stream readers).

If numba imports (and PIMSAT_SIM_NOJIT is not set), `njit` compiles with a disk cache; else it is
the identity and the kernel runs as plain Python on the same arrays (same results, ~100x slower).
Tested with numba 0.60-0.68.

Where the compiled code lives: numba's cache, next to the modules (`sim/__pycache__`,
`hwmodel/__pycache__`, `*.nbi`/`*.nbc`) where the install is writable, else in the user's cache
folder (`~/.cache/numba`, or `$XDG_CACHE_HOME/numba`), or in `$NUMBA_CACHE_DIR` if set. An entry
is keyed on its source file's timestamp and size, numba's version and the CPU: a fresh install
(or an upgrade) compiles once, on its first run (~10 s), and loads from the cache after that.
"""

from __future__ import annotations

import os

JIT = False
if not os.environ.get("PIMSAT_SIM_NOJIT"):
    try:
        import numba  # noqa: F401

        JIT = True
    except ImportError:  # pragma: no cover - depends on the environment
        JIT = False


def njit(fn=None, *, inline: bool = False):
    """numba.njit(cache=True) if numba is available, else the plain function. inline=True
    inlines a small helper into its callers (no separate compilation per literal signature)."""
    if fn is None:
        return lambda f: njit(f, inline=inline)
    if JIT:
        import numba

        if inline:
            return numba.njit(inline="always")(fn)
        disp = numba.njit(cache=True, nogil=True)(fn)
        cache = _light_cache(fn)
        if cache is not None:
            disp._cache = cache
        return disp
    return fn


def _light_cache(fn):
    """numba's disk cache of `fn`, minus the refresh of the target context before each load.

    numba's FunctionCache.load_overload first refreshes the CPU target context: it imports and
    installs every lowering registry (numba.cpython.*, numba.np.*), about 0.15-0.2 s of a
    process's start-up, which a function loaded from the cache does not use (its machine code
    is in the cache; loading links it) but for numba's runtime (NRT, initialized here first).
    A cache miss compiles, and numba's compiler refreshes the context itself (CompilerBase).
    None if this numba's cache is not the one this was written for (numba's own is kept)."""
    try:
        from numba.core.caching import FunctionCache
        from numba.core.runtime import rtsys
    except ImportError:  # pragma: no cover - depends on numba's version
        return None
    if not all(hasattr(FunctionCache, a) for a in ("_load_overload", "_guard_against_spurious_io_errors")):
        return None  # pragma: no cover - depends on numba's version

    class _Cache(FunctionCache):
        def load_overload(self, sig, target_context):
            rtsys.initialize(target_context)  # (numba's runtime: what the refresh does first)
            with self._guard_against_spurious_io_errors():
                return self._load_overload(sig, target_context)

    return _Cache(fn)
