"""Optional numba compilation of the hot loops (the channel kernel, the stream readers).

If numba imports (and PIMSAT_SIM_NOJIT is not set), `njit` compiles with a disk cache; else it is
the identity and the kernel runs as plain Python on the same arrays (same results, ~100x slower).
Tested with numba 0.60-0.68.
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
        return numba.njit(cache=True, nogil=True)(fn)
    return fn
