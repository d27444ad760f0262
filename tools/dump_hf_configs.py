"""Write the config.json files transformers itself saves for small Llama, Qwen2, Mistral, GPT-2 and
OPT models into tests/ir/hf_configs/ (transformers 5 layout: rope theta under rope_parameters).
Needs transformers (not a pimsat dependency): /tmp/torchenv/bin/python tools/dump_hf_configs.py"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import transformers as tf

OUT = Path(__file__).resolve().parent.parent / "tests" / "ir" / "hf_configs"
SMALL = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_hidden_layers=2, vocab_size=256)
CONFIGS = {
    "llama-t5": tf.LlamaConfig(**SMALL, num_key_value_heads=2, rope_theta=500000.0),
    "qwen2-t5": tf.Qwen2Config(**SMALL, num_key_value_heads=2, rope_theta=1000000.0),
    "mistral-t5": tf.MistralConfig(**SMALL, num_key_value_heads=2, sliding_window=None),
    "gpt2-t5": tf.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=256, n_positions=128),
    "opt-t5": tf.OPTConfig(hidden_size=64, ffn_dim=256, num_attention_heads=4, num_hidden_layers=2, vocab_size=256,
                           word_embed_proj_dim=64, max_position_embeddings=128),
}  # fmt: skip

if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    for name, cfg in CONFIGS.items():
        with tempfile.TemporaryDirectory() as d:
            cfg.save_pretrained(d)
            doc = json.loads((Path(d) / "config.json").read_text())
        (OUT / f"{name}.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        print(name, sorted(doc))
