"""Model configurations with Hugging Face ``config.json`` field names, and presets.

Three structures (``style``), all pre-norm decoder-only:

* ``gpt2``  — LayerNorm, biases, learned position embedding, plain MLP ``down(act(up(x)))``
  (gelu_new), MHA, tied lm head.
* ``opt``   — as gpt2, position table offset by 2 rows (HF ``OPTLearnedPositionalEmbedding``),
  ReLU MLP (OPT's real ``activation_function``).
* ``llama`` — RMSNorm, RoPE, gated MLP ``down(act(gate(x)) * up(x))`` (SwiGLU), GQA, no biases.
  Mistral and Llama-3 are llama style; Qwen2 too, with biases on q, k and v (not on o).

:func:`from_hf_config` builds a ``config.json`` with its real semantics or refuses it: every key
is modelled, known not to change a decode step's numbers (:data:`HARMLESS`), or accepted only at
its neutral value (:data:`NEUTRAL`); any other key, an unknown ``model_type`` and any RoPE scaling
(``rope_scaling`` of transformers 4, ``rope_parameters.rope_type`` of transformers 5) raise
:class:`IRError` naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from ir.errors import IRError
from ir.types import DType, itemsize

Style = Literal["gpt2", "opt", "llama"]
Activation = Literal["gelu_new", "gelu", "relu", "silu"]

#: Rows of the learned position table before position 0 (OPT reserves 2).
POSITION_OFFSET = {"gpt2": 0, "opt": 2, "llama": 0}


class ModelConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = "model"
    style: Style = "llama"
    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int | None = None  # default: num_attention_heads (MHA)
    head_dim: int | None = None  # default: hidden_size // num_attention_heads
    num_hidden_layers: int
    vocab_size: int
    max_position_embeddings: int = 2048
    norm: Literal["layernorm", "rmsnorm"] = "rmsnorm"
    hidden_act: Activation = "silu"
    attention_bias: bool = False  # q, k, v and o projections (HF Llama's attention_bias)
    qkv_bias: bool = False  # q, k and v projections only (Qwen2)
    mlp_bias: bool = False
    rms_norm_eps: float = 1e-6
    layer_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    tie_word_embeddings: bool = False
    sliding_window: int | None = None  # not modelled: contexts beyond it are rejected
    dtype: DType = DType.fp16

    @model_validator(mode="after")
    def _defaults(self) -> ModelConfig:
        for f in _DIMENSIONS:  # before any division by them
            if getattr(self, f) is not None and getattr(self, f) < 1:
                raise ValueError(f"{f}: must be >= 1, got {getattr(self, f)}")
        if self.num_key_value_heads is None:
            object.__setattr__(self, "num_key_value_heads", self.num_attention_heads)
        if self.head_dim is None:
            if self.hidden_size % self.num_attention_heads:
                raise ValueError(f"hidden_size {self.hidden_size} not divisible by heads {self.num_attention_heads}")
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_attention_heads)
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads {self.num_attention_heads} is not a multiple of "
                f"num_key_value_heads {self.num_key_value_heads}"
            )
        if self.style == "llama" and self.head_dim % 2:
            raise ValueError(f"head_dim {self.head_dim}: RoPE needs an even head_dim")
        return self

    # --- derived -----------------------------------------------------------------------------
    @property
    def qkv_biased(self) -> bool:
        return self.attention_bias or self.qkv_bias

    @property
    def gated_mlp(self) -> bool:
        return self.style == "llama"

    @property
    def learned_positions(self) -> bool:
        return self.style in ("gpt2", "opt")

    @property
    def position_offset(self) -> int:
        return POSITION_OFFSET[self.style]

    @property
    def norm_eps(self) -> float:
        return self.rms_norm_eps if self.norm == "rmsnorm" else self.layer_norm_eps

    @property
    def q_size(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_key_value_heads * self.head_dim

    def layer_parameters(self) -> int:
        h, i = self.hidden_size, self.intermediate_size
        attn = h * self.q_size + 2 * h * self.kv_size + self.q_size * h
        if self.attention_bias or self.qkv_bias:
            attn += self.q_size + 2 * self.kv_size + (h if self.attention_bias else 0)
        mlp = (3 if self.gated_mlp else 2) * h * i
        if self.mlp_bias:
            mlp += (2 * i if self.gated_mlp else i) + h
        norms = 2 * (2 * h if self.norm == "layernorm" else h)
        return attn + mlp + norms

    def num_parameters(self, layers: int | None = None) -> int:
        """Parameters of the full model (tied lm head counted once), or of its first ``layers``."""
        n = self.num_hidden_layers if layers is None else layers
        h = self.hidden_size
        total = self.vocab_size * h + n * self.layer_parameters()
        total += 2 * h if self.norm == "layernorm" else h
        if self.learned_positions:
            total += (self.max_position_embeddings + self.position_offset) * h
        if not self.tie_word_embeddings:
            total += self.vocab_size * h
        return total

    def kv_bytes(self, context: int, batch: int = 1, layers: int | None = None) -> int:
        """Bytes of k and v caches holding ``context`` tokens."""
        n = self.num_hidden_layers if layers is None else layers
        return 2 * n * batch * context * self.kv_size * itemsize(self.dtype)


_DIMENSIONS = (
    "hidden_size",
    "intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "num_hidden_layers",
    "vocab_size",
    "max_position_embeddings",
    "sliding_window",
)

#: ``model_type`` values of config.json that are understood, and the structure they map to
#: (a config without one is refused: the field decides the semantics).
MODEL_TYPES = {"gpt2": "gpt2", "opt": "opt", "llama": "llama", "mistral": "llama", "qwen2": "llama"}

#: Keys that do not change a decode step's numbers: ids, training-only settings, bookkeeping.
HARMLESS = frozenset(
    {
        "_name_or_path", "architectures", "auto_map", "model_type", "transformers_version", "torch_dtype", "dtype",
        "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id", "use_cache",
        "initializer_range", "init_std", "id2label", "label2id", "output_attentions", "output_hidden_states",
        "return_dict", "problem_type", "is_encoder_decoder", "chunk_size_feed_forward", "torchscript",
        "attention_dropout", "activation_dropout", "attn_pdrop", "embd_pdrop", "resid_pdrop", "dropout",
        "layerdrop", "hidden_dropout",
        "summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels", "summary_first_dropout",
        "task_specific_params", "prefix", "tokenizer_class", "n_ctx", "pretraining_tp", "reorder_and_upcast_attn",
        "max_window_layers", "keys_to_ignore_at_inference", "tie_encoder_decoder", "finetuning_task",
    }
)  # fmt: skip

#: Keys accepted only at the value that changes nothing pimsat does not model.
NEUTRAL: dict[str, object] = {
    "use_sliding_window": False,  # Qwen2: sliding-window attention on the upper layers
    "scale_attn_weights": True,  # GPT-2: scores scaled by 1/sqrt(head_dim)
    "scale_attn_by_inverse_layer_idx": False,
    "add_cross_attention": False,
    "_remove_final_layer_norm": False,  # OPT
    "layer_norm_elementwise_affine": True,  # OPT
    "use_mrope": False,  # Qwen2-VL's multimodal RoPE
    "partial_rotary_factor": 1.0,
}

#: Keys each structure reads (modelled).
MODELLED = {
    "gpt2": {"n_embd", "n_layer", "n_head", "n_inner", "n_positions", "vocab_size", "activation_function",
             "layer_norm_epsilon", "tie_word_embeddings"},
    "opt": {"hidden_size", "ffn_dim", "num_attention_heads", "num_hidden_layers", "vocab_size",
            "max_position_embeddings", "activation_function", "do_layer_norm_before", "word_embed_proj_dim",
            "enable_bias", "layer_norm_eps", "tie_word_embeddings"},
    "llama": {"hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
              "num_hidden_layers", "vocab_size", "max_position_embeddings", "hidden_act", "attention_bias",
              "mlp_bias", "rms_norm_eps", "rope_theta", "rope_scaling", "rope_parameters", "tie_word_embeddings",
              "sliding_window", "layer_types"},
}  # fmt: skip


def _check_keys(cfg: Mapping[str, Any], style: str) -> None:
    """Every key is modelled, harmless, or at its neutral value; else refused naming it."""
    for key, v in cfg.items():
        if key in HARMLESS or key in MODELLED[style]:
            continue
        if key in NEUTRAL:
            if v is not None and v != NEUTRAL[key]:
                raise IRError(f"config: {key}: {v!r} is not modelled (only {NEUTRAL[key]!r})")
            continue
        raise IRError(f"config: {key}: not modelled (it may change the model's numbers; pimsat does not build it)")


_ROPE_KEYS = {"rope_type", "type", "rope_theta"}


def _rope_theta(cfg: Mapping[str, Any]) -> float:
    """theta of unscaled RoPE from either layout: ``rope_theta`` (transformers 4) or
    ``rope_parameters.rope_theta`` (transformers 5); any scaling is refused."""
    theta = cfg.get("rope_theta")
    for field in ("rope_scaling", "rope_parameters"):
        params = cfg.get(field)
        if params is None:
            continue
        if not isinstance(params, Mapping):
            raise IRError(f"config: {field}: must be a mapping, got {params!r}")
        kind = params.get("rope_type", params.get("type", "default"))
        if kind != "default":
            raise IRError(f"config: {field}.rope_type: {kind!r} RoPE scaling is not modelled (only unscaled RoPE)")
        for key in params:
            if key not in _ROPE_KEYS and not (key == "partial_rotary_factor" and params[key] == 1):
                raise IRError(f"config: {field}.{key}: not modelled")
        if "rope_theta" in params:
            if theta is not None and float(theta) != float(params["rope_theta"]):
                raise IRError(f"config: {field}.rope_theta: {params['rope_theta']} contradicts rope_theta {theta}")
            theta = params["rope_theta"]
    if isinstance(theta, bool) or not isinstance(theta, (int, float, type(None))) or (theta is not None and theta <= 0):
        raise IRError(f"config: rope_theta: must be a positive number, got {theta!r}")
    return float(theta) if theta is not None else 10000.0


def _layer_types(cfg: Mapping[str, Any]) -> None:
    kinds = cfg.get("layer_types")
    if kinds is not None and any(k != "full_attention" for k in kinds):
        other = sorted({k for k in kinds if k != "full_attention"})
        raise IRError(f"config: layer_types: {other} layers are not modelled (only full_attention)")


#: Integer dimensions (>= 1) of each structure's config.json: required, then optional.
_HF_DIMENSIONS = {
    "gpt2": (("n_embd", "n_layer", "n_head", "vocab_size"), ("n_inner", "n_positions")),
    "opt": (
        ("hidden_size", "ffn_dim", "num_attention_heads", "num_hidden_layers", "vocab_size"),
        ("max_position_embeddings",),
    ),
    "llama": (
        ("hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers", "vocab_size"),
        ("num_key_value_heads", "head_dim", "max_position_embeddings", "sliding_window"),
    ),
}


def _check_dimensions(cfg: Mapping[str, Any], style: str) -> None:
    """Every dimension config.json gives is a whole number >= 1, named as config.json names it."""
    required, optional = _HF_DIMENSIONS[style]
    for key in required + optional:
        if key not in cfg or (key in optional and cfg[key] is None):
            if key in required:
                raise IRError(f"config: {key}: missing")
            continue
        v = cfg[key]
        if isinstance(v, bool) or not isinstance(v, int):
            raise IRError(f"config: {key}: must be a whole number, got {v!r}")
        if v < 1:
            raise IRError(f"config: {key}: must be >= 1, got {v}")


_TORCH_DTYPES = {"float16": DType.fp16, "bfloat16": DType.bf16, "float32": DType.fp32}


def _dtype(cfg: Mapping[str, Any]) -> DType:
    d = cfg.get("torch_dtype") or cfg.get("dtype") or "float16"
    if d not in _TORCH_DTYPES:
        raise IRError(f"config: torch_dtype: unsupported {d!r} (supported: {', '.join(_TORCH_DTYPES)})")
    return _TORCH_DTYPES[d]


def _act(value: str) -> Activation:
    table = {
        "gelu_new": "gelu_new",
        "gelu_pytorch_tanh": "gelu_new",
        "gelu_fast": "gelu_new",
        "gelu": "gelu",
        "relu": "relu",
        "silu": "silu",
        "swish": "silu",
    }
    if value not in table:
        raise IRError(f"config: hidden_act: unsupported activation {value!r} (supported: {', '.join(table)})")
    return table[value]  # type: ignore[return-value]


def from_hf_config(cfg: Mapping[str, Any], name: str | None = None, dtype: DType | str | None = None) -> ModelConfig:
    """Build a :class:`ModelConfig` from a Hugging Face ``config.json`` mapping.

    GPT-2 (``n_embd``, ``n_layer``, ``n_head``, ``n_inner``, ``n_positions``), OPT (``ffn_dim``,
    ``enable_bias``, ``do_layer_norm_before``) and Llama-family keys (llama, mistral, qwen2) are
    understood, RoPE theta in the transformers 4 (``rope_theta``) and 5 (``rope_parameters``)
    layouts. Features that would change the semantics and are not modelled (post-norm OPT,
    projected embeddings, RoPE scaling, sliding-window layers, any key not listed in this module)
    raise :class:`IRError` naming the field.
    """
    if "model_type" not in cfg:
        raise IRError(f"config: model_type: missing (supported: {', '.join(MODEL_TYPES)})")
    mt = cfg["model_type"]
    if mt not in MODEL_TYPES:
        raise IRError(f"config: model_type: {mt!r} is not supported (supported: {', '.join(MODEL_TYPES)})")
    _check_dimensions(cfg, MODEL_TYPES[mt])
    _check_keys(cfg, MODEL_TYPES[mt])
    common: dict[str, Any] = {
        "name": name or cfg.get("_name_or_path") or mt,
        "dtype": DType(dtype) if dtype else _dtype(cfg),
    }
    if mt == "gpt2":
        h = cfg["n_embd"]
        return ModelConfig(
            **common,
            style="gpt2",
            hidden_size=h,
            intermediate_size=cfg.get("n_inner") or 4 * h,
            num_attention_heads=cfg["n_head"],
            num_hidden_layers=cfg["n_layer"],
            vocab_size=cfg["vocab_size"],
            max_position_embeddings=cfg.get("n_positions", 1024),
            norm="layernorm",
            hidden_act=_act(cfg.get("activation_function", "gelu_new")),
            attention_bias=True,
            mlp_bias=True,
            layer_norm_eps=cfg.get("layer_norm_epsilon", 1e-5),
            tie_word_embeddings=cfg.get("tie_word_embeddings", True),
        )
    if mt == "opt":
        h = cfg["hidden_size"]
        if not cfg.get("do_layer_norm_before", True):
            raise IRError("config: do_layer_norm_before: post-norm OPT is not supported")
        if cfg.get("word_embed_proj_dim", h) != h:
            raise IRError("config: word_embed_proj_dim: projected embeddings (project_in/out) are not supported")
        bias = cfg.get("enable_bias", True)
        return ModelConfig(
            **common,
            style="opt",
            hidden_size=h,
            intermediate_size=cfg["ffn_dim"],
            num_attention_heads=cfg["num_attention_heads"],
            num_hidden_layers=cfg["num_hidden_layers"],
            vocab_size=cfg["vocab_size"],
            max_position_embeddings=cfg.get("max_position_embeddings", 2048),
            norm="layernorm",
            hidden_act=_act(cfg.get("activation_function", "relu")),
            attention_bias=bias,
            mlp_bias=bias,
            layer_norm_eps=cfg.get("layer_norm_eps", 1e-5),
            tie_word_embeddings=cfg.get("tie_word_embeddings", True),
        )
    theta = _rope_theta(cfg)
    _layer_types(cfg)
    window = cfg.get("sliding_window")
    if mt == "qwen2" and not cfg.get("use_sliding_window", False):
        window = None  # Qwen2 writes a sliding_window it does not use unless use_sliding_window
    return ModelConfig(
        **common,
        style="llama",
        hidden_size=cfg["hidden_size"],
        intermediate_size=cfg["intermediate_size"],
        num_attention_heads=cfg["num_attention_heads"],
        num_key_value_heads=cfg.get("num_key_value_heads"),
        head_dim=cfg.get("head_dim"),
        num_hidden_layers=cfg["num_hidden_layers"],
        vocab_size=cfg["vocab_size"],
        max_position_embeddings=cfg.get("max_position_embeddings", 2048),
        norm="rmsnorm",
        hidden_act=_act(cfg.get("hidden_act", "silu")),
        attention_bias=cfg.get("attention_bias", False),
        qkv_bias=mt == "qwen2",  # Qwen2Attention: q/k/v with bias, o_proj without
        mlp_bias=cfg.get("mlp_bias", False),
        rms_norm_eps=cfg.get("rms_norm_eps", 1e-6),
        rope_theta=theta,
        tie_word_embeddings=cfg.get("tie_word_embeddings", False),
        sliding_window=window,
    )


def _llama(name: str, h: int, i: int, layers: int, heads: int, kv: int, vocab: int, **kw: Any) -> ModelConfig:
    return ModelConfig(
        name=name,
        style="llama",
        hidden_size=h,
        intermediate_size=i,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        vocab_size=vocab,
        **kw,
    )


def _gpt(
    name: str, style: Style, h: int, i: int, layers: int, heads: int, vocab: int, max_pos: int, act: Activation
) -> ModelConfig:
    return ModelConfig(
        name=name,
        style=style,
        hidden_size=h,
        intermediate_size=i,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        vocab_size=vocab,
        max_position_embeddings=max_pos,
        norm="layernorm",
        hidden_act=act,
        attention_bias=True,
        mlp_bias=True,
        tie_word_embeddings=True,
    )


#: Dimensions from each model's own config.json (fp16 storage for all; override ``dtype``).
#: Mistral-7B is v0.1 minus its 4096-token sliding window (the v0.2 configuration drops it).
PRESETS: dict[str, ModelConfig] = {
    "gpt2": _gpt("gpt2", "gpt2", 768, 3072, 12, 12, 50257, 1024, "gelu_new"),
    "opt-6.7b": _gpt("opt-6.7b", "opt", 4096, 16384, 32, 32, 50272, 2048, "relu"),
    "llama-2-7b": _llama("llama-2-7b", 4096, 11008, 32, 32, 32, 32000, rms_norm_eps=1e-5, max_position_embeddings=4096),
    "llama-2-13b": _llama(
        "llama-2-13b", 5120, 13824, 40, 40, 40, 32000, rms_norm_eps=1e-5, max_position_embeddings=4096
    ),
    "llama-3-8b": _llama(
        "llama-3-8b",
        4096,
        14336,
        32,
        32,
        8,
        128256,
        rms_norm_eps=1e-5,
        rope_theta=500000.0,
        max_position_embeddings=8192,
    ),
    "mistral-7b": _llama("mistral-7b", 4096, 14336, 32, 32, 8, 32000, rms_norm_eps=1e-5, max_position_embeddings=32768),
    "llama-2-70b": _llama(
        "llama-2-70b", 8192, 28672, 80, 64, 8, 32000, rms_norm_eps=1e-5, max_position_embeddings=4096
    ),
    "tiny-llama": _llama(
        "tiny-llama", 64, 172, 2, 4, 2, 256, head_dim=16, rms_norm_eps=1e-5, max_position_embeddings=512
    ),
    "tiny-gpt2": _gpt("tiny-gpt2", "gpt2", 64, 256, 2, 4, 256, 128, "gelu_new"),
    "tiny-opt": _gpt("tiny-opt", "opt", 64, 256, 2, 4, 256, 128, "relu"),
}
