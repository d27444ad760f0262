"""The reference interpreter against an independent float64 numpy implementation of the models.

The independent code below reads weights by their HF names and never calls ir.reference. It does
no intermediate rounding, so the tolerance reflects the reference's per-op rounding:
fp32 1e-5, fp16 5e-3, bf16 3e-2 of the output's magnitude.
"""

import math

import numpy as np
import pytest

from ir import PRESETS, DType, attention_program, build_decode_step, gemv_program, generate_inputs, generate_state, run

TOL = {DType.fp32: 1e-5, DType.fp16: 5e-3, DType.bf16: 3e-2}  # max error / max |value|


# ----------------------------------------------------------------- independent model (float64)
def f64(a):
    return np.asarray(a, dtype=np.float64)


def layernorm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    sd = np.sqrt(x.var(-1, keepdims=True) + eps)
    return (x - mu) / sd * w + b


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x**2, -1, keepdims=True) + eps) * w


def rope_complex(x, heads, d, pos, theta):
    """Rotate pairs (i, i + d/2) as complex numbers: same maths as rotate-half, different code."""
    x = x.reshape(x.shape[0], heads, d)
    z = x[..., : d // 2] + 1j * x[..., d // 2 :]
    freq = np.array([pos / theta ** (2 * i / d) for i in range(d // 2)])
    z = z * np.exp(1j * freq)
    return np.concatenate([z.real, z.imag], -1).reshape(x.shape[0], heads * d)


def gelu(x, tanh):
    if tanh:
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    return np.array([[0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in row] for row in x])


def attention(q, kc, vc, heads, kvh, d):
    """q [B, heads*d]; kc/vc [B, kvh, L, d] (already containing the new token)."""
    B = q.shape[0]
    out = np.zeros((B, heads, d))
    for b in range(B):
        for h in range(heads):
            g = h // (heads // kvh)
            s = kc[b, g] @ q[b, h * d : (h + 1) * d] / math.sqrt(d)
            p = np.exp(s - s.max())
            out[b, h] = (p / p.sum()) @ vc[b, g]
    return out.reshape(B, heads * d)


def independent_forward(c, n_layers, ids, context, S):
    W = {k: f64(v) for k, v in S.items()}

    def lin(name, x, bias):
        y = x @ W[f"{name}.weight"].T
        return y + W[f"{name}.bias"] if bias else y

    def norm(name, x):
        if c.norm == "layernorm":
            return layernorm(x, W[f"{name}.weight"], W[f"{name}.bias"], c.layer_norm_eps)
        return rmsnorm(x, W[f"{name}.weight"], c.rms_norm_eps)

    x = W["embed_tokens.weight"][ids]
    if c.learned_positions:
        x = x + W["embed_positions.weight"][context + c.position_offset]
    d, heads, kvh = c.head_dim, c.num_attention_heads, c.num_key_value_heads
    B = len(ids)
    for i in range(n_layers):
        p = f"layers.{i}"
        y = norm(f"{p}.input_layernorm", x)
        q, k, v = (lin(f"{p}.self_attn.{n}_proj", y, c.attention_bias) for n in "qkv")
        if c.style == "llama":
            q = rope_complex(q, heads, d, context, c.rope_theta)
            k = rope_complex(k, kvh, d, context, c.rope_theta)
        kc = W[f"{p}.self_attn.k_cache"][:, :, : context + 1].copy()
        vc = W[f"{p}.self_attn.v_cache"][:, :, : context + 1].copy()
        kc[:, :, context] = k.reshape(B, kvh, d)
        vc[:, :, context] = v.reshape(B, kvh, d)
        x = x + lin(f"{p}.self_attn.o_proj", attention(q, kc, vc, heads, kvh, d), c.attention_bias)
        y = norm(f"{p}.post_attention_layernorm", x)
        if c.style == "llama":
            g = lin(f"{p}.mlp.gate_proj", y, c.mlp_bias)
            h = g / (1 + np.exp(-g)) * lin(f"{p}.mlp.up_proj", y, c.mlp_bias)
        else:
            u = lin(f"{p}.mlp.up_proj", y, c.mlp_bias)
            h = np.maximum(u, 0) if c.hidden_act == "relu" else gelu(u, c.hidden_act == "gelu_new")
        x = x + lin(f"{p}.mlp.down_proj", h, c.mlp_bias)
    head = W["embed_tokens.weight"] if c.tie_word_embeddings else W["lm_head.weight"]
    return x, norm("norm", x) @ head.T


def rel_err(got, want):
    return float(np.max(np.abs(f64(got) - want)) / np.max(np.abs(want)))


# ----------------------------------------------------------------------------------------- tests
@pytest.mark.parametrize("preset", ["tiny-llama", "tiny-gpt2", "tiny-opt"])
@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("layers", [1, 2])
def test_decode_step_matches_independent_model(preset, dtype, layers):
    c = PRESETS[preset].model_copy(update={"dtype": DType(dtype)})
    batch, context = 2, 5
    p = build_decode_step(c, batch, context, layers=layers)
    inputs, state = generate_inputs(p, seed=7), generate_state(p, seed=7)
    out = run(p, inputs, state)
    hidden, logits = independent_forward(c, layers, inputs["input_ids"], context, state)
    assert rel_err(out[f"layers.{layers - 1}.mlp_residual.out"], hidden) < TOL[c.dtype]
    assert rel_err(out["lm_head.out"], logits) < TOL[c.dtype]
    assert out["lm_head.out"].dtype == (np.float16 if dtype == "fp16" else np.float32)
    # argmax agrees wherever the top two logits are clearly apart
    top2 = np.sort(logits, -1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 2 * TOL[c.dtype] * np.max(np.abs(logits))
    assert np.array_equal(out["next_token.out"][clear], logits.argmax(-1)[clear])
    assert out["next_token.out"].dtype == np.int32


def test_kv_append_writes_one_position_and_keeps_state():
    c = PRESETS["tiny-llama"]
    p = build_decode_step(c, 1, 3, layers=1)
    state = generate_state(p, 0)
    before = state["layers.0.self_attn.k_cache"].copy()
    out = run(p, generate_inputs(p, 0), state)
    after = out["layers.0.self_attn.k_cache@3"]
    assert np.array_equal(state["layers.0.self_attn.k_cache"], before)  # state not mutated
    assert np.array_equal(after[:, :, :3], before[:, :, :3])
    assert np.array_equal(after[0, :, 3].reshape(-1), out["layers.0.self_attn.k_rope.out"][0])
    assert np.all(before[:, :, 3:] == 0)


@pytest.mark.parametrize("dtype,bias,batch", [("fp16", False, 1), ("fp32", True, 3), ("bf16", True, 2)])
def test_gemv_kernel(dtype, bias, batch):
    p = gemv_program(24, 40, batch=batch, dtype=dtype, bias=bias)
    inputs, state = generate_inputs(p, 1), generate_state(p, 1)
    out = run(p, inputs, state)["gemv.out"]
    want = f64(inputs["x"]) @ f64(state["gemv.weight"]).T + (f64(state["gemv.bias"]) if bias else 0)
    assert out.shape == (batch, 24)
    assert rel_err(out, want) < TOL[DType(dtype)] / 4


@pytest.mark.parametrize("heads,kv_heads,head_dim,context,batch", [(4, 2, 8, 5, 2), (2, 2, 16, 0, 1), (8, 1, 4, 9, 1)])
def test_attention_kernel(heads, kv_heads, head_dim, context, batch):
    p = attention_program(heads, kv_heads, head_dim, context, batch=batch, dtype="fp32")
    inputs, state = generate_inputs(p, 2), generate_state(p, 2)
    out = run(p, inputs, state)
    kc, vc = f64(state["k_cache"]), f64(state["v_cache"])
    kc[:, :, context] = f64(inputs["k"]).reshape(batch, kv_heads, head_dim)
    vc[:, :, context] = f64(inputs["v"]).reshape(batch, kv_heads, head_dim)
    want = attention(f64(inputs["q"]), kc, vc, heads, kv_heads, head_dim)
    assert rel_err(out["context.out"], want) < 1e-5
    assert np.allclose(out["softmax.out"].sum(-1), 1, atol=1e-5)


def test_generated_state_is_per_tensor_and_seeded():
    full = build_decode_step(PRESETS["tiny-llama"], 1, 4)
    prefix = build_decode_step(PRESETS["tiny-llama"], 1, 4, layers=1)
    a, b = generate_state(full, 3), generate_state(prefix, 3)
    for name in b:
        assert np.array_equal(a[name], b[name])
    assert not np.array_equal(a["norm.weight"], generate_state(full, 4)["norm.weight"])
    cache = a["layers.1.self_attn.v_cache"]
    assert np.all(cache[:, :, 4:] == 0) and np.all(cache[:, :, :4] != 0)
    ids = generate_inputs(full, 0)["input_ids"]
    assert ids.dtype == np.int32 and 0 <= ids.min() and ids.max() < 256


def test_run_checks_shapes_and_missing_values():
    from ir import IRError

    p = gemv_program(4, 8)
    state = generate_state(p)
    with pytest.raises(IRError, match="missing inputs"):
        run(p, {}, state)
    with pytest.raises(IRError, match="tensor 'x': value has shape"):
        run(p, {"x": np.zeros((1, 9))}, state)
    with pytest.raises(IRError, match="state lacks"):
        run(p, {"x": np.zeros((1, 8))}, {})


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_matrices_drawn_in_chunks_equal_one_draw(dtype):
    """generate_state draws a matrix a chunk at a time into its storage array (a 152k-token
    embedding never exists whole in float32): the values are those of one draw of the whole."""
    from ir.types import Tensor, round_to
    from ir.weights import _matrix, _rng

    t = Tensor(name="w", shape=(37, 50), dtype=dtype, role="weight")
    whole = round_to(dtype, _rng(3, "w").standard_normal(t.shape, dtype=np.float32) / np.float32(np.sqrt(50)))
    for chunk in (2, 64, 1000, 1 << 20):
        assert np.array_equal(_matrix(t, _rng(3, "w"), chunk=chunk), whole)


def test_embedding_widens_only_the_rows_it_gathers(monkeypatch):
    """The reference gathers an embedding's rows in storage form, then widens them: the same
    values as widening the whole table first, without a float32 copy of it."""
    import ir.reference as ref

    p = build_decode_step(PRESETS["tiny-llama"], 2, 4, layers=1)
    inputs, state = generate_inputs(p, 0), generate_state(p, 0)
    op = next(o for o in p.topo_order() if o.kind.name == "embed")
    table = state[op.inputs[1]]
    widened, real = [], ref._operand
    monkeypatch.setattr(ref, "_operand", lambda a: (widened.append(a.size), real(a))[1])
    got = ref.execute(op, p, {op.inputs[0]: inputs[op.inputs[0]], op.inputs[1]: table})
    assert max(widened) < table.size  # never the whole table
    ids = inputs[op.inputs[0]]
    assert np.array_equal(got, table.astype(np.float32)[ids].astype(got.dtype))
