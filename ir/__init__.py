"""pimsat IR: programs of one LLM decode step, with numpy reference semantics.

Build (:func:`build_decode_step`, :func:`gemv_program`, :func:`attention_program`), inspect
(:class:`Program`), run (:func:`run` on :func:`generate_inputs` / :func:`generate_state`).
"""

from ir.builders import build_decode_step
from ir.errors import IRError
from ir.kernels import attention_program, gemv_program
from ir.models import PRESETS, ModelConfig, from_hf_config
from ir.ops import PIM_CAPABLE, OpKind
from ir.program import Op, Program
from ir.reference import run
from ir.text import format_program
from ir.types import DType, Role, Tensor, as_stored, itemsize, round_to, to_numpy_dtype
from ir.weights import generate_inputs, generate_state

__all__ = [
    "DType",
    "IRError",
    "ModelConfig",
    "Op",
    "OpKind",
    "PIM_CAPABLE",
    "PRESETS",
    "Program",
    "Role",
    "Tensor",
    "attention_program",
    "build_decode_step",
    "format_program",
    "from_hf_config",
    "gemv_program",
    "generate_inputs",
    "generate_state",
    "itemsize",
    "as_stored",
    "round_to",
    "run",
    "to_numpy_dtype",
]
