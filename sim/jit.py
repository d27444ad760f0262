"""The simulator's compiled kernels use hwmodel/jit.py's optional numba (PIMSAT_SIM_NOJIT=1: plain Python)."""

from hwmodel.jit import JIT, njit  # noqa: F401
