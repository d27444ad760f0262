"""The one exception type of the IR: every malformed program, op or config raises it."""

from __future__ import annotations


class IRError(ValueError):
    """A program, op or model description is malformed.

    Messages name where the problem is (op name and kind, the field such as ``inputs[1]`` or
    ``attrs.position``) and what is wrong, e.g.
    ``op 'layers.0.self_attn.q_proj' (gemv): inputs[1] 'q_proj.weight': shape (32, 48) ...``.
    """
