import pytest

from ir import PRESETS, IRError, ModelConfig, from_hf_config

LLAMA2_7B_JSON = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-05,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "torch_dtype": "float16",
    "rope_scaling": None,
    "rope_theta": 10000.0,
}
GPT2_JSON = {
    "model_type": "gpt2",
    "n_embd": 768,
    "n_layer": 12,
    "n_head": 12,
    "n_inner": None,
    "vocab_size": 50257,
    "n_positions": 1024,
    "n_ctx": 1024,
    "activation_function": "gelu_new",
    "layer_norm_epsilon": 1e-05,
}
OPT_JSON = {
    "model_type": "opt",
    "hidden_size": 4096,
    "ffn_dim": 16384,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "vocab_size": 50272,
    "max_position_embeddings": 2048,
    "activation_function": "relu",
    "do_layer_norm_before": True,
    "word_embed_proj_dim": 4096,
    "enable_bias": True,
    "torch_dtype": "float16",
}
LLAMA3_JSON = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 32,
    "vocab_size": 128256,
    "rope_theta": 500000.0,
    "rms_norm_eps": 1e-05,
    "max_position_embeddings": 8192,
    "torch_dtype": "bfloat16",
}


def _close(value: float, target: float, rel: float) -> bool:
    return abs(value - target) <= rel * target


def test_llama2_7b_parameter_count():
    assert _close(PRESETS["llama-2-7b"].num_parameters(), 6.74e9, 0.005)


@pytest.mark.parametrize(
    "name,target",
    [
        ("gpt2", 124e6),
        ("mistral-7b", 7.24e9),
        ("llama-3-8b", 8.03e9),
        ("llama-2-13b", 13.0e9),
        ("llama-2-70b", 69.0e9),
        ("opt-6.7b", 6.66e9),
    ],
)
def test_preset_parameter_counts(name, target):
    assert _close(PRESETS[name].num_parameters(), target, 0.01)


@pytest.mark.parametrize(
    "name,row",
    [
        ("gpt2", (768, 3072, 12, 12, 12, 64, 50257)),
        ("opt-6.7b", (4096, 16384, 32, 32, 32, 128, 50272)),
        ("llama-2-7b", (4096, 11008, 32, 32, 32, 128, 32000)),
        ("llama-2-13b", (5120, 13824, 40, 40, 40, 128, 32000)),
        ("llama-3-8b", (4096, 14336, 32, 32, 8, 128, 128256)),
        ("mistral-7b", (4096, 14336, 32, 32, 8, 128, 32000)),
        ("llama-2-70b", (8192, 28672, 80, 64, 8, 128, 32000)),
    ],
)
def test_presets_match_brief_table(name, row):
    c = PRESETS[name]
    assert (
        c.hidden_size,
        c.intermediate_size,
        c.num_hidden_layers,
        c.num_attention_heads,
        c.num_key_value_heads,
        c.head_dim,
        c.vocab_size,
    ) == row


def test_tiny_presets():
    t = PRESETS["tiny-llama"]
    assert (
        t.hidden_size,
        t.num_attention_heads,
        t.num_key_value_heads,
        t.head_dim,
        t.vocab_size,
        t.num_hidden_layers,
    ) == (64, 4, 2, 16, 256, 2)
    g = PRESETS["tiny-gpt2"]
    assert (g.hidden_size, g.num_attention_heads, g.intermediate_size, g.vocab_size) == (64, 4, 256, 256)


def test_from_hf_config_llama2_matches_preset():
    c = from_hf_config(LLAMA2_7B_JSON, name="llama-2-7b")
    assert c == PRESETS["llama-2-7b"]


def test_from_hf_config_gpt2_opt_llama3():
    g = from_hf_config(GPT2_JSON)
    assert (g.style, g.intermediate_size, g.hidden_act, g.tie_word_embeddings) == ("gpt2", 3072, "gelu_new", True)
    assert g.num_parameters() == PRESETS["gpt2"].num_parameters()
    o = from_hf_config(OPT_JSON)
    assert (o.style, o.hidden_act, o.attention_bias) == ("opt", "relu", True)
    assert o.num_parameters() == PRESETS["opt-6.7b"].num_parameters()
    l3 = from_hf_config(LLAMA3_JSON)
    assert (l3.num_key_value_heads, l3.head_dim, l3.rope_theta, l3.dtype.value) == (8, 128, 500000.0, "bf16")


def test_from_hf_config_rejects_unmodelled_features():
    with pytest.raises(IRError, match="rope_scaling"):
        from_hf_config({**LLAMA3_JSON, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}})
    with pytest.raises(IRError, match="do_layer_norm_before"):
        from_hf_config({**OPT_JSON, "do_layer_norm_before": False})
    with pytest.raises(IRError, match="hidden_act"):
        from_hf_config({**LLAMA2_7B_JSON, "hidden_act": "quick_gelu"})


def test_config_validation():
    with pytest.raises(ValueError, match="num_key_value_heads"):
        ModelConfig(
            hidden_size=64,
            intermediate_size=8,
            num_attention_heads=4,
            num_key_value_heads=3,
            num_hidden_layers=1,
            vocab_size=8,
        )


def test_kv_bytes_llama2_7b():
    assert _close(PRESETS["llama-2-7b"].kv_bytes(2048), 1.07e9, 0.005)
