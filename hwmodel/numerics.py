"""The hardware's arithmetic, bit for bit: one definition, used by the simulator and by the
bit-true model (sim/bittrue.py).

A dot product of a vector x and a matrix row w of length K (both already in the operand dtype,
fp16 or bf16, held in fp32) is computed burst by burst, E elements (one burst) at a time:

1. products: lane j of burst b is x[bE + j] * w[bE + j] in fp32, exact for fp16 and bf16
   operands (11 or 8 significant bits each, at most 22 in the product). The last burst is padded
   with zeros on both sides (a partly filled burst holds 0 beyond the data).
2. burst sum: the E products are added by a balanced adder tree, each adder rounding to fp32:
   level 1 adds lane j and lane j + E/2 for j < E/2, level 2 lane j and j + E/4 of those sums,
   and so on (E is padded with zero lanes to a power of two).
3. accumulation: the burst sums are added to an fp32 accumulator in burst order, starting at 0:
   acc = fp32(acc + s_b), b = 0, 1, ...

This holds wherever the dot product runs: in a PIM unit (MAC commands, one accumulator per
output element; RDACC adds it to a zeroed fp32 staging element, which is exact; a gemv split
along k over two sets of channels, solver/ksplit.py, adds two such partial sums there, A + B in
fp32, the same bits in either order) and in the host
matrix unit (HMV rows; a gemv or attention run by HOP). The op-level results built from it
(`gemv`, `attn_score`, `attn_context`) are then rounded once to the output dtype by the caller.
"""

from __future__ import annotations

import math

import numpy as np

F32 = np.float32


def burst_sums(products: np.ndarray) -> np.ndarray:
    """[..., E] fp32 products -> [...] fp32 burst sums by the balanced adder tree."""
    p = np.asarray(products, dtype=F32)
    e = p.shape[-1]
    width = 1 << max(0, (e - 1).bit_length())
    if width != e:
        p = np.concatenate([p, np.zeros(p.shape[:-1] + (width - e,), dtype=F32)], axis=-1)
    while p.shape[-1] > 1:
        h = p.shape[-1] // 2
        p = p[..., :h] + p[..., h:]  # fp32 + fp32 -> fp32: one rounding per adder
    return p[..., 0]


def accumulate(acc: np.ndarray, sums: np.ndarray) -> np.ndarray:
    """acc [...] fp32 plus the burst sums [..., n] in order, rounding to fp32 after each add."""
    out = np.asarray(acc, dtype=F32).copy()
    for b in range(sums.shape[-1]):
        out = out + sums[..., b]
    return out


def dot(x: np.ndarray, w: np.ndarray, e: int, max_block: int = 1 << 22) -> np.ndarray:
    """x [V, K], w [N, K] (values of the operand dtype, any float dtype) -> fp32 [V, N], each
    element by the hardware's dot product with bursts of e elements."""
    x = np.asarray(x, dtype=F32)
    w = np.asarray(w, dtype=F32)
    v, k = x.shape
    n = w.shape[0]
    if w.shape[1] != k:
        raise ValueError(f"dot: x has {k} columns, w {w.shape[1]}")
    bursts = -(-k // e) if k else 0
    pad = bursts * e - k
    if pad:
        x = np.concatenate([x, np.zeros((v, pad), dtype=F32)], axis=1)
        w = np.concatenate([w, np.zeros((n, pad), dtype=F32)], axis=1)
    xb = x.reshape(v, bursts, e)
    wb = w.reshape(n, bursts, e)
    acc = np.zeros((v, n), dtype=F32)
    rows = max(1, max_block // max(1, v * e))  # output rows per block: bounded temporaries
    for r0 in range(0, n, rows):
        part = acc[:, r0 : r0 + rows]
        for b in range(bursts):
            s = burst_sums(xb[:, None, b, :] * wb[None, r0 : r0 + rows, b, :])
            part = part + s
        acc[:, r0 : r0 + rows] = part
    return acc


# ---- the PIM-capable ops, before their output rounding -----------------------------------------
def pim_op(kind: str, attrs: dict, operands: list[np.ndarray], e: int, k_cuts: tuple[int, ...] = ()) -> np.ndarray:
    """The fp32 result of a gemv / attn_score / attn_context from its operand values (a gemv
    split along k at `k_cuts`: see `gemv`)."""
    if kind == "gemv":
        return gemv(operands[0], operands[1], operands[2] if len(operands) == 3 else None, e, k_cuts)
    if kind == "attn_score":
        return attn_score(attrs, operands[0], operands[1], e)
    if kind == "attn_context":
        return attn_context(attrs, operands[0], operands[1], e)
    raise ValueError(f"{kind} is not a PIM-capable op")


def gemv(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, e: int, k_cuts: tuple[int, ...] = ()) -> np.ndarray:
    """x [..., K], w [N, K] -> fp32 [..., N]: dot, then + bias in fp32 (the epilogue).

    `k_cuts` (elements, burst boundaries): k is split there, each range's dot product
    accumulated on its own (on other channels) and the partial sums added in fp32 in k order,
    as their read-outs add into the staging (for two ranges the order does not matter)."""
    lead = x.shape[:-1]
    x2 = x.reshape(-1, x.shape[-1])
    edges = (0, *k_cuts, x.shape[-1])
    y = None
    for a, b in zip(edges, edges[1:]):
        part = dot(x2[:, a:b], w[:, a:b], e)
        y = part if y is None else y + part
    y = y.reshape(*lead, w.shape[0])
    if bias is not None:
        y = y + np.asarray(bias, dtype=F32)
    return y


def attn_score(attrs: dict, q: np.ndarray, cache: np.ndarray, e: int) -> np.ndarray:
    """q [B, heads*hd], cache [B, kv_heads, L, hd] -> fp32 [B, heads, pos+1]: q_h . K[l] per
    position, then * fp32(1/sqrt(hd)) (the epilogue)."""
    heads, hd, pos = attrs["heads"], attrs["head_dim"], attrs["position"]
    group = heads // attrs["kv_heads"]
    b = q.shape[0]
    qh = np.asarray(q, dtype=F32).reshape(b, heads, hd)
    out = np.empty((b, heads, pos + 1), dtype=F32)
    for bi in range(b):
        for h in range(heads):
            out[bi, h] = dot(qh[bi, h][None], cache[bi, h // group, : pos + 1], e)[0]
    return out * F32(1.0 / math.sqrt(hd))


def attn_context(attrs: dict, p: np.ndarray, cache: np.ndarray, e: int) -> np.ndarray:
    """p [B, heads, pos+1], cache [B, kv_heads, L, hd] -> fp32 [B, heads*hd]: the reduction over
    positions, p_h . V[:, d] per head dimension d."""
    heads, hd, pos = attrs["heads"], attrs["head_dim"], attrs["position"]
    group = heads // attrs["kv_heads"]
    b = p.shape[0]
    out = np.empty((b, heads, hd), dtype=F32)
    for bi in range(b):
        for h in range(heads):
            vt = np.asarray(cache[bi, h // group, : pos + 1], dtype=F32).T  # [hd, L]
            out[bi, h] = dot(np.asarray(p[bi, h], dtype=F32)[None], vt, e)[0]
    return out.reshape(b, heads * hd)


# ---- the tolerance check against the float reference ---------------------------------------------
# The exact check is against the bit-true model (sim/bittrue.py); the float reference (ir.reference:
# fp32 compute, one rounding) differs from the hardware's arithmetic by its summation order and
# roundings. One rule, used by `pimsat solve`, `pimsat simulate` and `sim.verify`: an output matches
# when max |got - ref| <= TOLERANCE[dtype] x max(1, max |ref|); integer outputs exactly, but for an
# argmax over float logits where the program is known (`pimsat solve`, `pimsat simulate`): there
# each index must be one whose reference logit is within the logits' tolerance of the row's
# maximum (`argmax_within_tolerance`), as two logits nearer than that may rank either way.
# The dtype whose tolerance applies is the coarser of the output's and the device's arithmetic
# (`tolerance_dtype`): a `gddr6-aim` unit multiplies in bf16, so an fp16 output it computed carries
# bf16's roundings (found by bench/whatif_fuzz.py, large case 665: Tiny Llama b8 c41, row 7 of its
# fp16 logits 0.097 off the float reference, the fp16 rule allowing 0.069, every tensor equal to
# the bit-true model). On such a device data that is wrong by less than bf16's tolerance passes
# this check; the exact check against the bit-true model is what refuses it.
TOLERANCE = {"fp16": 2e-2, "bf16": 6e-2, "fp32": 1e-4, "int32": 0.0}


def tolerance_dtype(declared: str, arithmetic: str | None = None) -> str:
    """The dtype whose tolerance judges an output `declared` computed by a device whose
    arithmetic is `arithmetic` (None: the declared one): the coarser of the two; integers stay
    exact."""
    if arithmetic is None or declared == "int32" or declared not in TOLERANCE or arithmetic not in TOLERANCE:
        return declared
    return arithmetic if TOLERANCE[arithmetic] > TOLERANCE[declared] else declared


def within_tolerance(
    got: np.ndarray, ref: np.ndarray, dtype: str, tolerance: dict[str, float] | None = None
) -> tuple[bool, float]:
    """(match, max |got - ref|) of one output under the rule above (`tolerance` overrides entries
    of TOLERANCE). A shape mismatch or NaN is no match, with error inf."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        return False, float("inf")
    err = float(np.max(np.abs(got - ref))) if got.size else 0.0
    if math.isnan(err):
        return False, float("inf")
    tol = {**TOLERANCE, **(tolerance or {})}.get(dtype, TOLERANCE["fp16"])
    if tol == 0.0:
        return err == 0.0, err
    scale = max(1.0, float(np.max(np.abs(ref)))) if ref.size else 1.0
    return err <= tol * scale, err


def argmax_within_tolerance(
    got: np.ndarray, logits: np.ndarray, dtype: str, tolerance: dict[str, float] | None = None
) -> tuple[bool, int]:
    """(match, rows whose index is not the reference's) of an argmax output `got` [...] over
    float logits whose reference values are `logits` [..., V] of `dtype`: each index must pick a
    logit within the logits' tolerance (the rule above, scaled by max(1, max |logits|)) of its
    row's reference maximum. The reference's own choice always matches; another only at a
    near-tie. A shape mismatch is no match."""
    ref = np.asarray(logits, dtype=np.float64)
    idx = np.asarray(got)
    if idx.shape != ref.shape[:-1] or (idx.size and (idx.min() < 0 or idx.max() >= ref.shape[-1])):
        return False, int(idx.size)
    tol = {**TOLERANCE, **(tolerance or {})}.get(dtype, TOLERANCE["fp16"])
    scale = max(1.0, float(np.max(np.abs(ref)))) if ref.size else 1.0
    chosen = np.take_along_axis(ref, idx.astype(np.int64)[..., None], axis=-1)[..., 0]
    best = ref.max(axis=-1)
    differ = int(np.count_nonzero(idx != ref.argmax(axis=-1)))
    return bool(np.all(chosen >= best - tol * scale)), differ
