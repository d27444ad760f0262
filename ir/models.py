"""Model configurations with Hugging Face ``config.json`` field names, and presets.

Three structures (``style``), all pre-norm decoder-only:

* ``gpt2``  — LayerNorm, biases, learned position embedding, plain MLP ``down(act(up(x)))``
  (gelu_new), MHA, tied lm head.
* ``opt``   — as gpt2, position table offset by 2 rows (HF ``OPTLearnedPositionalEmbedding``),
  ReLU MLP (OPT's real ``activation_function``).
* ``llama`` — RMSNorm, RoPE, gated MLP ``down(act(gate(x)) * up(x))`` (SwiGLU), GQA, no biases.
  Mistral and Llama-3 are llama style.
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
    attention_bias: bool = False
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
        if self.attention_bias:
            attn += self.q_size + 2 * self.kv_size + h
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
#: (a config without one is read as llama).
MODEL_TYPES = {"gpt2": "gpt2", "opt": "opt", "llama": "llama", "mistral": "llama"}

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
    ``enable_bias``, ``do_layer_norm_before``) and Llama-family keys are understood. Features that
    would change the semantics and are not modelled (post-norm OPT, projected embeddings,
    ``rope_scaling``) raise :class:`IRError`.
    """
    mt = cfg.get("model_type", "llama")
    if mt not in MODEL_TYPES:
        raise IRError(f"config: model_type: {mt!r} is not supported (supported: {', '.join(MODEL_TYPES)})")
    _check_dimensions(cfg, MODEL_TYPES[mt])
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
    if cfg.get("rope_scaling"):
        raise IRError(f"config: rope_scaling: {cfg['rope_scaling']!r} is not supported")
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
        mlp_bias=cfg.get("mlp_bias", False),
        rms_norm_eps=cfg.get("rms_norm_eps", 1e-6),
        rope_theta=float(cfg.get("rope_theta", 10000.0)),
        tie_word_embeddings=cfg.get("tie_word_embeddings", False),
        sliding_window=cfg.get("sliding_window"),
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
