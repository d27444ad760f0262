"""config.json built with its real semantics or refused (issue 19 item 3).

The decisive checks run against PyTorch: the config.json of each tiny Hugging Face fixture
(tests/frontend/fixtures, written by tools/make_pt2_fixtures.py with transformers 5: theta under
``rope_parameters``) is built by ir.build_decode_step, given the fixture's weights (read from its
.pt2 without torch) and inputs, and run by the reference interpreter; its logits are PyTorch's
within the fp16 tolerance. The configs transformers 5 saves (tests/ir/hf_configs, by
tools/dump_hf_configs.py) and hub configs of the supported families are accepted as they are.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import ir
from hwmodel.numerics import within_tolerance
from ir import IRError, from_hf_config
from ir.pt2 import read_archive

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "frontend" / "fixtures"
SAVED = Path(__file__).parent / "hf_configs"

QWEN25_7B = {  # Qwen/Qwen2.5-7B config.json (transformers 4 layout)
    "architectures": ["Qwen2ForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151643,
    "hidden_act": "silu",
    "hidden_size": 3584,
    "initializer_range": 0.02,
    "intermediate_size": 18944,
    "max_position_embeddings": 131072,
    "max_window_layers": 28,
    "model_type": "qwen2",
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0,
    "sliding_window": 131072,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.43.1",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 152064,
}
MISTRAL_7B = {  # mistralai/Mistral-7B-v0.1
    "architectures": ["MistralForCausalLM"],
    "bos_token_id": 1,
    "eos_token_id": 2,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 32768,
    "model_type": "mistral",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0,
    "sliding_window": 4096,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.34.0.dev0",
    "use_cache": True,
    "vocab_size": 32000,
}
GPT2_HUB = {  # openai-community/gpt2
    "activation_function": "gelu_new",
    "architectures": ["GPT2LMHeadModel"],
    "attn_pdrop": 0.1,
    "bos_token_id": 50256,
    "embd_pdrop": 0.1,
    "eos_token_id": 50256,
    "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05,
    "model_type": "gpt2",
    "n_ctx": 1024,
    "n_embd": 768,
    "n_head": 12,
    "n_layer": 12,
    "n_positions": 1024,
    "resid_pdrop": 0.1,
    "summary_activation": None,
    "summary_first_dropout": 0.1,
    "summary_proj_to_labels": True,
    "summary_type": "cls_index",
    "summary_use_proj": True,
    "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
    "vocab_size": 50257,
}

OPT_6_7B = {  # facebook/opt-6.7b
    "_name_or_path": "facebook/opt-6.7b",
    "_remove_final_layer_norm": False,
    "activation_dropout": 0.0,
    "activation_function": "relu",
    "architectures": ["OPTForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 2,
    "do_layer_norm_before": True,
    "dropout": 0.1,
    "eos_token_id": 2,
    "ffn_dim": 16384,
    "hidden_size": 4096,
    "init_std": 0.02,
    "layerdrop": 0.0,
    "max_position_embeddings": 2048,
    "model_type": "opt",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "pad_token_id": 1,
    "prefix": "</s>",
    "torch_dtype": "float16",
    "transformers_version": "4.21.0.dev0",
    "use_cache": True,
    "vocab_size": 50272,
    "word_embed_proj_dim": 4096,
}


def _fixture_config(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.config.json").read_text())


def _state(program: ir.Program, name: str, step: dict) -> dict[str, np.ndarray]:
    """The builder's tensors from the fixture's archive (HF names; GPT-2's Conv1D transposed and
    its fused c_attn split) and the past caches from its inputs."""
    w = read_archive(FIXTURES / f"{name}.pt2").weights
    state = {}
    for t in program.weights():
        if name == "tiny-gpt2":
            arr = _gpt2_weight(w, t.name, program)
        elif name == "tiny-opt":
            arr = w[_opt_name(t.name)]
        else:
            arr = w["model.lm_head.weight"] if t.name == "lm_head.weight" else w[f"model.model.{t.name}"]
        assert arr.shape == t.shape, t.name
        state[t.name] = arr
    for t in program.kv_caches():
        i, which = int(t.name.split(".")[1]), t.name.split(".")[-1][0]
        past = step[f"past_{2 * i + (which == 'v')}"]
        full = np.zeros(t.shape, np.float16)
        full[:, :, : past.shape[2]] = past
        state[t.name] = full
    return state


def _gpt2_weight(w: dict, name: str, program: ir.Program) -> np.ndarray:
    h = program.tensors["embed_tokens.weight"].shape[1]
    if name == "embed_tokens.weight":
        return w["model.lm_head.weight"]  # tied
    if name == "embed_positions.weight":
        return w["model.transformer.wpe.weight"]
    if name.startswith("norm."):
        return w[f"model.transformer.ln_f.{name.split('.')[-1]}"]
    _, i, *rest = name.split(".")
    p, kind = f"model.transformer.h.{i}", rest[-1]
    mod = ".".join(rest[:-1])
    simple = {
        "input_layernorm": "ln_1",
        "post_attention_layernorm": "ln_2",
        "self_attn.o_proj": "attn.c_proj",
        "mlp.up_proj": "mlp.c_fc",
        "mlp.down_proj": "mlp.c_proj",
    }
    if mod in simple:
        arr = w[f"{p}.{simple[mod]}.{kind}"]
        return arr.T if kind == "weight" and "proj" in mod else arr
    part = "qkv".index(mod.split(".")[1][0])
    fused = w[f"{p}.attn.c_attn.{kind}"]
    return fused.T[part * h : (part + 1) * h] if kind == "weight" else fused[part * h : (part + 1) * h]


def _opt_name(name: str) -> str:
    """The OPT checkpoint's name of a builder weight."""
    d = "model.model.decoder"
    top = {"embed_tokens.weight": f"{d}.embed_tokens.weight", "embed_positions.weight": f"{d}.embed_positions.weight"}
    if name in top:
        return top[name]
    if name.startswith("norm."):
        return f"{d}.final_layer_norm.{name.split('.')[-1]}"
    _, i, *rest = name.split(".")
    mod, kind = ".".join(rest[:-1]), rest[-1]
    mod = {
        "input_layernorm": "self_attn_layer_norm",
        "post_attention_layernorm": "final_layer_norm",
        "self_attn.o_proj": "self_attn.out_proj",
        "mlp.up_proj": "fc1",
        "mlp.down_proj": "fc2",
    }.get(mod, mod)
    return f"{d}.layers.{i}.{mod}.{kind}"


def _run(cfg: dict, name: str):
    step = dict(np.load(FIXTURES / f"{name}.npz"))
    program = ir.build_decode_step(from_hf_config(cfg), batch=1, context=int(step["position_ids"][0, 0]))
    state = _state(program, name, step)
    values = ir.run(program, {"input_ids": step["input_ids"].reshape(1).astype(np.int32)} | _fixed(program), state)
    return values["lm_head.out"], step["out_0"].reshape(1, -1), program, state, step


def _fixed(program: ir.Program) -> dict:
    return {k: np.full((1,), v, np.int32) for k, v in program.meta["fixed_inputs"].items()}


@pytest.mark.parametrize("name", ["tiny-llama-gqa", "tiny-qwen2", "tiny-gpt2", "tiny-opt"])
def test_config_builds_what_pytorch_computes(name):
    got, want, *_ = _run(_fixture_config(name), name)
    ok, err = within_tolerance(got, want.astype(np.float32), "fp16")
    assert ok and err <= 4e-3, err
    assert got.argmax() == want.argmax()


def test_qwen2_has_qkv_biases_and_they_matter():
    cfg = _fixture_config("tiny-qwen2")
    program = ir.build_decode_step(from_hf_config(cfg), batch=1, context=5)
    names = set(program.tensors)
    assert {f"layers.0.self_attn.{p}_proj.bias" for p in "qkv"} <= names
    assert "layers.0.self_attn.o_proj.bias" not in names  # Qwen2's o_proj has none
    as_llama = {**cfg, "model_type": "llama"}
    for k in ("layer_types", "use_sliding_window", "sliding_window", "max_window_layers"):
        as_llama.pop(k)
    got, want, *_ = _run(as_llama, "tiny-qwen2")
    ok, err = within_tolerance(got, want.astype(np.float32), "fp16")
    assert not ok and err > 0.05  # built without its biases, the model computes something else


def test_transformers_5_rope_parameters_theta():
    c = from_hf_config(_fixture_config("tiny-llama-gqa"))
    assert c.rope_theta == 500000.0
    program = ir.build_decode_step(c, batch=1, context=5)
    assert {op.attrs["theta"] for op in program.ops if op.kind is ir.OpKind.rope} == {500000.0}
    assert from_hf_config(json.loads((SAVED / "qwen2-t5.json").read_text())).rope_theta == 1e6


@pytest.mark.parametrize("path", sorted(SAVED.glob("*.json")), ids=lambda p: p.stem)
def test_configs_transformers_5_saves_are_accepted(path):
    from_hf_config(json.loads(path.read_text()))


@pytest.mark.parametrize(
    "cfg", [QWEN25_7B, MISTRAL_7B, GPT2_HUB, OPT_6_7B], ids=["qwen2.5-7b", "mistral-7b", "gpt2", "opt-6.7b"]
)
def test_hub_configs_are_accepted(cfg):
    c = from_hf_config(cfg)
    if cfg is QWEN25_7B:
        assert (c.qkv_bias, c.attention_bias, c.rope_theta, c.sliding_window) == (True, False, 1e6, None)
    if cfg is MISTRAL_7B:
        assert c.sliding_window == 4096
    if cfg is OPT_6_7B:
        assert c.num_parameters() == ir.PRESETS["opt-6.7b"].num_parameters()


LLAMA = json.loads((SAVED / "llama-t5.json").read_text()) if SAVED.exists() else {}


@pytest.mark.parametrize(
    "change,field",
    [
        ({"model_type": "gemma"}, "model_type: 'gemma'"),
        ({"model_type": None}, "model_type"),
        ({"rope_parameters": {"rope_type": "llama3", "factor": 8.0, "rope_theta": 5e5}}, "rope_parameters.rope_type"),
        ({"rope_scaling": {"type": "linear", "factor": 2.0}}, "rope_scaling.rope_type"),
        ({"rope_parameters": {"rope_type": "default", "rope_theta": 5e5, "mscale": 2}}, "rope_parameters.mscale"),
        ({"rope_theta": 1e4}, "rope_parameters.rope_theta"),
        ({"quantization_config": {"quant_method": "gptq"}}, "quantization_config"),
        ({"partial_rotary_factor": 0.5}, "partial_rotary_factor"),
        ({"layer_types": ["full_attention", "sliding_attention"]}, "layer_types"),
    ],
)
def test_refused_naming_the_field(change, field):
    cfg = {**LLAMA, **change}
    if change.get("model_type", "") is None:
        cfg.pop("model_type")
    with pytest.raises(IRError) as e:
        from_hf_config(cfg)
    assert str(e.value).startswith("config: ") and field in str(e.value), str(e.value)


def test_qwen2_sliding_window_in_use_is_refused():
    with pytest.raises(IRError, match="use_sliding_window"):
        from_hf_config({**QWEN25_7B, "use_sliding_window": True})
