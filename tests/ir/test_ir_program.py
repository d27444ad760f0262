import time
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ir import (
    PIM_CAPABLE,
    PRESETS,
    IRError,
    ModelConfig,
    OpKind,
    Program,
    build_decode_step,
    format_program,
    generate_inputs,
    generate_state,
    run,
)


@st.composite
def tiny_configs(draw):
    style = draw(st.sampled_from(["llama", "gpt2", "opt"]))
    heads = draw(st.sampled_from([1, 2, 4]))
    kv = draw(st.sampled_from([d for d in (1, 2, 4) if heads % d == 0])) if style == "llama" else heads
    head_dim = draw(st.sampled_from([2, 4, 8]))
    common = dict(
        name="rand",
        style=style,
        hidden_size=heads * head_dim,
        intermediate_size=draw(st.integers(1, 24)),
        num_attention_heads=heads,
        num_key_value_heads=kv,
        head_dim=head_dim,
        num_hidden_layers=draw(st.integers(1, 2)),
        vocab_size=draw(st.integers(2, 40)),
        max_position_embeddings=16,
        dtype=draw(st.sampled_from(["fp16", "bf16", "fp32"])),
        tie_word_embeddings=draw(st.booleans()),
    )
    if style == "llama":
        return ModelConfig(**common, rope_theta=draw(st.sampled_from([10000.0, 500000.0])))
    return ModelConfig(
        **common,
        norm="layernorm",
        attention_bias=True,
        mlp_bias=True,
        hidden_act=draw(st.sampled_from(["gelu_new", "gelu", "relu"])),
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    config=tiny_configs(),
    batch=st.integers(1, 4),
    context=st.integers(1, 8),
    layers=st.integers(1, 2),
    seed=st.integers(0, 3),
)
def test_json_round_trip_and_runs(config, batch, context, layers, seed):
    layers = min(layers, config.num_hidden_layers)
    p = build_decode_step(config, batch, context, layers=layers)
    q = Program.from_json(p.to_json())
    assert q == p
    assert q.to_json() == p.to_json()
    assert format_program(q) == format_program(p)
    assert [op.name for op in q.topo_order()] == [op.name for op in p.topo_order()]
    values = run(p, generate_inputs(p, seed), generate_state(p, seed))
    assert values["next_token.out"].shape == (batch,)
    assert set(values) == set(p.tensors)


def test_topo_order_is_deterministic_and_index_keyed():
    p = build_decode_step(PRESETS["tiny-llama"], 1, 4)
    assert [op.name for op in p.topo_order()] == [op.name for op in p.ops]  # builder emits a topological order
    shuffled = Program(**{**p.model_dump(), "ops": list(reversed(p.ops))})
    order = [op.name for op in shuffled.topo_order()]
    assert order == [op.name for op in shuffled.topo_order()]
    pos = {n: i for i, n in enumerate(order)}
    for u, v in shuffled.graph().edges:
        assert pos[u] < pos[v]
    # among ready ops, the one listed first wins: reversed list -> v_proj before k_proj before q_proj
    qkv = [n for n in order if n.endswith(("q_proj", "k_proj", "v_proj")) and n.startswith("layers.0.")]
    assert qkv == ["layers.0.self_attn.v_proj", "layers.0.self_attn.k_proj", "layers.0.self_attn.q_proj"]


def test_structure_helpers():
    p = build_decode_step(PRESETS["tiny-llama"], 2, 5, layers=1)
    assert p.producers()["layers.0.self_attn.q_proj.out"] == "layers.0.self_attn.q_proj"
    cons = p.consumers()["layers.0.input_layernorm.out"]
    assert cons == ["layers.0.self_attn.q_proj", "layers.0.self_attn.k_proj", "layers.0.self_attn.v_proj"]
    assert p.consumers()["layers.0.post_attention_layernorm.out"] == ["layers.0.mlp.gate_proj", "layers.0.mlp.up_proj"]
    assert [t.name for t in p.kv_caches()] == ["layers.0.self_attn.k_cache", "layers.0.self_attn.v_cache"]
    assert p.storage("layers.0.self_attn.k_cache@5") == "layers.0.self_attn.k_cache"
    assert p.resident_operand("layers.0.self_attn.scores") == "layers.0.self_attn.k_cache"
    assert p.resident_operand("layers.0.self_attn.context") == "layers.0.self_attn.v_cache"
    assert p.resident_operand("layers.0.mlp.up_proj") == "layers.0.mlp.up_proj.weight"
    assert p.resident_operand("layers.0.self_attn.softmax") is None
    assert p.state_updates() == {
        "layers.0.self_attn.k_cache": "layers.0.self_attn.k_cache@5",
        "layers.0.self_attn.v_cache": "layers.0.self_attn.v_cache@5",
    }
    assert p.tensor("layers.0.self_attn.k_cache").shape == (2, 2, 6, 16)
    assert {op.kind for op in p.ops if op.pim_capable} == set(PIM_CAPABLE)
    g = p.graph()
    assert g.number_of_nodes() == len(p.ops)
    assert g.edges["layers.0.self_attn.k_append", "layers.0.self_attn.scores"]["tensors"] == [
        "layers.0.self_attn.k_cache@5"
    ]
    assert p.num_parameters() == sum(t.numel for t in p.weights())


def test_model_copy_revalidates_and_drops_caches():
    p = build_decode_step(PRESETS["tiny-llama"], 1, 2, layers=1)
    p.topo_order()
    q = p.model_copy(update={"ops": list(reversed(p.ops))})
    assert q.topo_order()[0].name == "embed_tokens" and q.ops[0].name == "next_token"
    with pytest.raises(IRError, match="unknown tensor"):
        p.model_copy(update={"outputs": ["nope"]})
    assert p.model_copy() == p


def test_tied_head_and_prefix_options():
    c = PRESETS["tiny-gpt2"]
    p = build_decode_step(c, 1, 3)
    assert "lm_head.weight" not in p.tensors
    assert p.op("lm_head").inputs[1] == "embed_tokens.weight"
    assert p.num_parameters() == c.num_parameters()
    assert p.meta["fixed_inputs"] == {"position_ids": 3}
    bare = build_decode_step(c, 1, 3, layers=1, embed=False, lm_head=False)
    assert bare.inputs == ["hidden_states"] and bare.outputs == ["layers.0.mlp_residual.out"]
    assert not any(op.kind in (OpKind.embed, OpKind.argmax) for op in bare.ops)
    opt = build_decode_step(PRESETS["tiny-opt"], 1, 3)
    assert opt.meta["fixed_inputs"] == {"position_ids": 5}  # OPT offsets positions by 2
    assert opt.tensor("embed_positions.weight").shape == (130, 64)


def test_llama2_7b_sizes_without_allocating_weights():
    c = PRESETS["llama-2-7b"]
    tracemalloc.start()
    t0 = time.perf_counter()
    one = build_decode_step(c, 1, 2048, layers=1)
    full = build_decode_step(c, 1, 2048)
    elapsed = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert elapsed < 5 and peak < 50e6  # no weight arrays
    h, i = 4096, 11008
    assert one.num_parameters() == 2 * 32000 * h + 4 * h * h + 3 * h * i + 3 * h
    assert one.kv_bytes() == 2 * 2049 * h * 2
    assert full.num_parameters() == c.num_parameters()
    assert abs(full.weight_bytes() - 6.74e9 * 2) <= 0.005 * 6.74e9 * 2
    # the brief's 13.21 GB are the weights streamed by GEMVs (embedding gather excluded)
    assert abs(full.pim_weight_bytes() - 13.21e9) <= 0.001 * 13.21e9
    assert abs(full.kv_bytes() - 1.07e9) <= 0.005 * 1.07e9
    assert sum(op.kind is OpKind.gemv for op in full.ops) == 32 * 7 + 1
