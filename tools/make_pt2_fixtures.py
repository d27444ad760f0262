"""Regenerate the torch.export fixtures of tests/frontend/fixtures (needs torch and transformers;
neither is a dependency of pimsat). Run it in a separate environment, e.g.

    python3 -m venv /tmp/torchenv && /tmp/torchenv/bin/pip install torch==2.13.0 transformers
    /tmp/torchenv/bin/python tools/make_pt2_fixtures.py

Each fixture is one decode step of a tiny random Hugging Face model (fp16), exported with
``torch.export.export`` and saved with ``torch.export.save``:

* ``<name>.pt2``  the archive, with every node's ``stack_trace`` metadata removed (it holds the
  exporting machine's paths) and ``from_node`` (provenance that changes on every run); the rest is
  what torch wrote (``nn_module_stack`` and ``torch_fn`` kept);
* ``<name>.config.json``  the model's config.json as transformers saves it (its layout: rope
  theta under ``rope_parameters``), for the tests of the config builder against PyTorch;
* ``<name>.npz``  the step's inputs by the exported graph's input names (``input_ids``,
  ``position_ids``, ``past_0``, ``past_1``, ...: layer i's keys are ``past_<2i>``, its values
  ``past_<2i+1>``) and PyTorch's own outputs, ``out_0`` (logits), ``out_<2i+1>`` and
  ``out_<2i+2>`` (layer i's keys and values after the append), computed by the saved archive
  loaded back.

The graph's inputs are token ids [1, 1], position ids [1, 1] and the past keys and values of every
layer [1, kv_heads, past, head_dim]; its outputs the logits [1, 1, vocab] and every layer's
keys and values after the step's append [1, kv_heads, past + 1, head_dim].
"""

from __future__ import annotations

import io
import json
import sys
import zipfile
from pathlib import Path

import numpy as np
import torch
from transformers import (
    DynamicCache,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    OPTConfig,
    OPTForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

OUT = Path(__file__).resolve().parent.parent / "tests" / "frontend" / "fixtures"
PAST = 5  # tokens already in the cache: the step writes position PAST


class DecodeStep(torch.nn.Module):
    """One decode step with the cache as plain tensors (a DynamicCache built from them)."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model
        self.layers = model.config.num_hidden_layers

    def forward(self, input_ids, position_ids, *past):
        cache = DynamicCache(config=self.model.config)
        for i in range(self.layers):
            cache.update(past[2 * i], past[2 * i + 1], i)
        out = self.model(input_ids=input_ids, position_ids=position_ids, past_key_values=cache, use_cache=True)
        new = []
        for layer in out.past_key_values.layers:
            new += [layer.keys, layer.values]
        return (out.logits, *new)


def _llama(attn: str = "sdpa", layers: int = 2) -> torch.nn.Module:
    cfg = LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        num_hidden_layers=layers,
        vocab_size=256,
        max_position_embeddings=64,
        rms_norm_eps=1e-5,
        rope_theta=500000.0,
        initializer_range=0.1,
        attn_implementation=attn,
    )
    return LlamaForCausalLM(cfg)


def _qwen2() -> torch.nn.Module:
    cfg = Qwen2Config(
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_hidden_layers=2,
        vocab_size=256,
        max_position_embeddings=64,
        rms_norm_eps=1e-6,
        rope_theta=1000000.0,
        initializer_range=0.1,
        attn_implementation="sdpa",
    )
    model = Qwen2ForCausalLM(cfg)
    with torch.no_grad():  # HF initialises biases to zero: make them matter
        for layer in model.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                proj.bias.normal_(0, 0.5)
    return model


def _gpt2() -> torch.nn.Module:
    cfg = GPT2Config(
        n_embd=64,
        n_layer=2,
        n_head=4,
        vocab_size=256,
        n_positions=64,
        activation_function="gelu_new",
        bos_token_id=0,
        eos_token_id=0,
        initializer_range=0.1,
        attn_implementation="sdpa",
    )
    return GPT2LMHeadModel(cfg)


def _opt() -> torch.nn.Module:
    cfg = OPTConfig(
        hidden_size=64,
        ffn_dim=256,
        num_attention_heads=4,
        num_hidden_layers=2,
        vocab_size=256,
        word_embed_proj_dim=64,
        max_position_embeddings=64,
        init_std=0.1,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=1,
        attn_implementation="sdpa",
    )
    return OPTForCausalLM(cfg)


def _llama_2048() -> torch.nn.Module:
    """A mid-size Llama (hidden 2048, head_dim 128, GQA 16:4, 2 layers, vocab 32000: a 443 MB
    archive, not a fixture) for measuring the importer; its inv_freq stays float32 after the cast
    to fp16, as from_pretrained(torch_dtype=float16) keeps it."""
    cfg = LlamaConfig(
        hidden_size=2048,
        intermediate_size=5632,
        num_attention_heads=16,
        num_key_value_heads=4,
        head_dim=128,
        num_hidden_layers=2,
        vocab_size=32000,
        attn_implementation="sdpa",
    )
    return LlamaForCausalLM(cfg)


MODELS = {
    "tiny-llama-gqa": _llama,
    "tiny-qwen2": _qwen2,
    "tiny-gpt2": _gpt2,
    "tiny-opt": _opt,  # learned positions offset by 2, q scaled before SDPA, ReLU
    "tiny-llama-gqa-eager": lambda: _llama("eager"),  # attention as matmul, softmax, matmul
}
LARGE = {"llama-2048-2l": _llama_2048}  # only when named, and with --out DIR
#: Variants of those models: ``core`` exported and then lowered to core ATen
#: (``run_decompositions()``: linear as permute + mm/addmm, SDPA as its math decomposition with bmm
#: and _softmax); ``b2`` two sequences per step (token ids [2, 1]), ``b4`` four (the
#: batch at which pimsat offers micro-batches); ``bf16`` in bfloat16 (the .npz
#: holds its values as float32, exactly).
VARIANTS = {
    "tiny-llama-gqa-core": ("tiny-llama-gqa", "core"),
    "tiny-gpt2-core": ("tiny-gpt2", "core"),
    "tiny-llama-gqa-b2": ("tiny-llama-gqa", "b2"),
    "tiny-llama-gqa-b4": ("tiny-llama-gqa", "b4"),
    "tiny-llama-gqa-bf16": ("tiny-llama-gqa", "bf16"),
}


def make_static(name: str = "tiny-llama-gqa-static", seed: int = 0) -> None:
    """The Llama fixture with transformers' static cache (executorch's export wrapper): the cache
    is a lifted constant [1, kv_heads, 8, head_dim] written by index_copy_ at cache_position. The
    first PAST tokens are run eagerly before the export, so the archive holds a filled cache; the
    graph's inputs are input_ids and cache_position, its output the logits."""
    from transformers import GenerationConfig
    from transformers.integrations.executorch import TorchExportableModuleWithStaticCache

    torch.manual_seed(seed)
    model = _llama().to(torch.float16).eval()
    model.generation_config = GenerationConfig(
        use_cache=True,
        cache_implementation="static",
        max_length=8,
        cache_config={"batch_size": 1, "max_cache_len": 8, "device": "cpu"},
    )
    step = TorchExportableModuleWithStaticCache(model, batch_size=1, max_cache_len=8)
    with torch.no_grad():
        for pos in range(PAST):
            step(input_ids=torch.tensor([[3 + pos]]), cache_position=torch.tensor([pos]))
        kwargs = {"input_ids": torch.tensor([[7]]), "cache_position": torch.tensor([PAST])}
        ep = torch.export.export(step, (), kwargs, strict=False)
        logits = step(**kwargs)  # the eager step, from the same filled cache
    path = OUT / f"{name}.pt2"
    torch.export.save(ep, path)
    _strip(path)
    np.savez(OUT / f"{name}.npz", **{k: v.numpy() for k, v in kwargs.items()}, out_0=logits.numpy())
    print(f"{path.name}: {path.stat().st_size:,} bytes; {len(ep.graph.nodes)} nodes")


@torch.library.custom_op("pimsat_fixture::quick_act", mutates_args=())
def quick_act(x: torch.Tensor) -> torch.Tensor:
    """A custom op (what a frontend team's fused kernel looks like in an exported graph)."""
    return x * torch.sigmoid(1.702 * x)


@quick_act.register_fake
def _(x):
    return torch.empty_like(x)


class QuickAct(torch.nn.Module):
    def forward(self, x):
        return quick_act(x)


def make_refused() -> None:
    """One-layer Llama steps pimsat must refuse: ``refuse-custom-op`` (the MLP's activation is a
    torch.library custom op) and ``refuse-dynamic`` (exported with a dynamic past length)."""
    for name in ("refuse-custom-op", "refuse-dynamic"):
        torch.manual_seed(0)
        model = _llama(layers=1).to(torch.float16).eval()
        if name == "refuse-custom-op":
            model.model.layers[0].mlp.act_fn = QuickAct()
        past = [torch.randn(1, 2, PAST, 16, dtype=torch.float16) for _ in range(2)]
        args = (torch.tensor([[7]]), torch.tensor([[PAST]]), *past)
        dynamic = None
        if name == "refuse-dynamic":
            n = torch.export.Dim.AUTO
            dynamic = {"input_ids": None, "position_ids": None, "past": ({2: n}, {2: n})}
        with torch.no_grad():
            ep = torch.export.export(DecodeStep(model), args, dynamic_shapes=dynamic)
        path = OUT / f"{name}.pt2"
        torch.export.save(ep, path)
        _strip(path)
        print(f"{path.name}: {path.stat().st_size:,} bytes; {len(ep.graph.nodes)} nodes")


def _strip(path: Path) -> None:
    """Remove every node's stack_trace (absolute paths of this machine) and from_node (the passes'
    provenance, with Python object ids that change on every run) from models/*.json."""
    with zipfile.ZipFile(path) as z:
        entries = [(i, z.read(i.filename)) for i in z.infolist()]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for info, data in entries:
            if "/models/" in info.filename and info.filename.endswith(".json"):
                doc = json.loads(data)
                for node in doc["graph_module"]["graph"]["nodes"]:
                    node.get("metadata", {}).pop("stack_trace", None)
                    node.get("metadata", {}).pop("from_node", None)  # pass provenance with object ids
                data = json.dumps(doc).encode()
            z.writestr(info, data)
    path.write_bytes(buf.getvalue())


def make(name: str, seed: int = 0) -> None:
    torch.manual_seed(seed)
    base, variant = VARIANTS.get(name, (name, None))
    dtype = torch.bfloat16 if variant == "bf16" else torch.float16
    model = {**MODELS, **LARGE}[base]()
    keep = model.model.rotary_emb.inv_freq.clone() if name in LARGE else None
    model = model.to(dtype).eval()
    if keep is not None:  # float32, as from_pretrained(torch_dtype=...) leaves it
        model.model.rotary_emb.inv_freq = keep
    batch = {"b2": 2, "b4": 4}.get(variant, 1)
    cfg = model.config
    kvh = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    hd = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    step = DecodeStep(model)
    past_len = 127 if name in LARGE else PAST
    past = [torch.randn(batch, kvh, past_len, hd, dtype=dtype) for _ in range(2 * cfg.num_hidden_layers)]
    args = (torch.tensor([[7], [9], [3], [12]][:batch]), torch.tensor([[past_len]] * batch), *past)
    with torch.no_grad():
        ep = torch.export.export(step, args)
        if variant == "core":
            ep = ep.run_decompositions()
    path = OUT / f"{name}.pt2"
    torch.export.save(ep, path)
    _strip(path)
    loaded = torch.export.load(path)  # the stripped archive is still a valid one
    with torch.no_grad():
        outs = loaded.module()(*args)
    arrays = {n: _numpy(a) for n, a in zip(ep.graph_signature.user_inputs, args)}
    arrays |= {f"out_{i}": _numpy(o) for i, o in enumerate(outs)}
    np.savez(OUT / f"{name}.npz", **arrays)
    print(f"{path.name}: {path.stat().st_size:,} bytes; {len(ep.graph.nodes)} nodes")
    if variant is None and name not in LARGE:
        doc = json.loads(cfg.to_json_string())
        doc.pop("_name_or_path", None)
        (OUT / f"{name}.config.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")


def _numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach()
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


if __name__ == "__main__":
    names = sys.argv[1:]
    if "--out" in names:  # elsewhere than the fixtures folder (the large model)
        i = names.index("--out")
        OUT = Path(names[i + 1])
        names = names[:i] + names[i + 2 :]
    OUT.mkdir(parents=True, exist_ok=True)
    for n in names or [*MODELS, *VARIANTS, "tiny-llama-gqa-static", "refused"]:
        if n == "refused":
            make_refused()
        else:
            make_static(n) if n.endswith("-static") else make(n)
