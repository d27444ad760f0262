"""The tolerance rule against the float reference (hwmodel.numerics): a float output within
TOLERANCE x max(1, max |ref|); an argmax over float logits, each index one whose reference logit is
within that tolerance of its row's maximum."""

from __future__ import annotations

import numpy as np

from hwmodel.numerics import TOLERANCE, argmax_within_tolerance, within_tolerance

LOGITS = np.array([[0.5, 3.25, 3.2598, -1.0], [2.0, 0.0, 1.0, 1.9]], dtype=np.float32)  # max |.| 3.26


def test_a_float_output_matches_at_the_scaled_tolerance_and_not_beyond():
    tol = TOLERANCE["fp16"] * 3.2598
    assert within_tolerance(LOGITS + np.float32(tol * 0.99), LOGITS, "fp16")[0]
    assert not within_tolerance(LOGITS + np.float32(tol * 1.01), LOGITS, "fp16")[0]


def test_an_argmax_may_take_a_near_tie_and_nothing_else():
    assert argmax_within_tolerance(np.array([2, 0]), LOGITS, "fp16") == (True, 0)  # the reference's
    assert argmax_within_tolerance(np.array([1, 0]), LOGITS, "fp16") == (True, 1)  # 3.25: 0.0098 below
    assert argmax_within_tolerance(np.array([2, 3]), LOGITS, "fp16") == (False, 1)  # 1.9: 0.1 below
    assert argmax_within_tolerance(np.array([0, 0]), LOGITS, "fp16") == (False, 1)
    # at the edge of the tolerance (0.02 x 3.2598 = 0.0652 below the maximum) and one step beyond
    edge = LOGITS.copy()
    edge[0, 1] = np.float32(3.2598 - 0.0651)
    assert argmax_within_tolerance(np.array([1, 0]), edge, "fp16")[0]
    edge[0, 1] = np.float32(3.2598 - 0.0653)
    assert not argmax_within_tolerance(np.array([1, 0]), edge, "fp16")[0]


def test_an_argmax_of_another_shape_or_out_of_range_is_no_match():
    assert argmax_within_tolerance(np.array([2]), LOGITS, "fp16") == (False, 1)
    assert argmax_within_tolerance(np.array([2, 4]), LOGITS, "fp16") == (False, 2)


def test_the_coarser_of_the_output_and_the_arithmetic_judges():
    from hwmodel.numerics import tolerance_dtype

    assert tolerance_dtype("fp16", "bf16") == "bf16"  # an fp16 output of a bf16 device
    assert tolerance_dtype("bf16", "fp16") == "bf16"
    assert tolerance_dtype("fp16", "fp16") == "fp16"
    assert tolerance_dtype("fp32", "fp16") == "fp16"
    assert tolerance_dtype("fp16", None) == "fp16"
    assert tolerance_dtype("int32", "bf16") == "int32"  # integers stay exact


def test_a_bf16_device_is_judged_at_bf16_at_the_boundary():
    from hwmodel.numerics import TOLERANCE, tolerance_dtype

    key = tolerance_dtype("fp16", "bf16")
    tol = TOLERANCE["bf16"] * float(np.max(np.abs(LOGITS)))
    assert within_tolerance(LOGITS + np.float32(tol * 0.99), LOGITS, key)[0]
    assert not within_tolerance(LOGITS + np.float32(tol * 1.01), LOGITS, key)[0]
    assert not within_tolerance(LOGITS + np.float32(tol * 0.99), LOGITS, "fp16")[0]  # fp16's rule refuses it
