"""What the torch.export frontend refuses, each with one line naming the reason (issue 19): the
fixtures rewritten the way another torch version, a quantiser or a custom op would have written
them."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from pt2_edit import edit_json, node, rewrite

from ir.errors import IRError
from ir.pt2 import ArchiveError, ImportRefused, import_pt2, read_archive

FIXTURES = Path(__file__).parent / "fixtures"
LLAMA, GPT2 = FIXTURES / "tiny-llama-gqa.pt2", FIXTURES / "tiny-gpt2.pt2"


def refused(exc, path: Path, *words: str) -> str:
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith(str(path))
    for w in words:
        assert w in msg, msg
    return msg


def test_schema_major_other_than_8(tmp_path):
    def older(doc):
        doc["schema_version"]["major"] = 7

    p = rewrite(LLAMA, tmp_path / "m.pt2", edit_json("models/model.json", older))
    with pytest.raises(ArchiveError) as e:
        read_archive(p)
    refused(e, p, "schema_version major 7", "8")


def test_pickled_weight(tmp_path):
    def pickled(doc):
        doc["config"]["model.lm_head.weight"]["use_pickle"] = True

    p = rewrite(LLAMA, tmp_path / "m.pt2", edit_json("model_weights_config.json", pickled))
    with pytest.raises(ArchiveError) as e:
        import_pt2(p)
    refused(e, p, "model.lm_head.weight", "pickled")


def test_quantised_dtype(tmp_path):
    def fp8(doc):
        doc["config"]["model.lm_head.weight"]["tensor_meta"]["dtype"] = 29

    p = rewrite(LLAMA, tmp_path / "m.pt2", edit_json("model_weights_config.json", fp8))
    with pytest.raises(ArchiveError) as e:
        read_archive(p)
    refused(e, p, "float8_e4m3fn", "not supported")


def test_old_layout(tmp_path):
    def old(name, data):
        if name.endswith("data/weights/model_weights_config.json"):
            return None
        return b"pickle" if name.endswith("data/weights/weight_0") else data

    p = rewrite(LLAMA, tmp_path / "a.pt2", old)
    with zipfile.ZipFile(p, "a") as z:
        root = z.namelist()[0].split("/")[0]
        z.writestr(f"{root}/data/weights/model.pt", b"\x80\x02pickled")
    with pytest.raises(ArchiveError) as e:
        read_archive(p)
    refused(e, p, "old archive layout", "torch >= 2.9")


def test_dynamic_shape(tmp_path):
    def dynamic(doc):
        tv = doc["graph_module"]["graph"]["tensor_values"]
        tv["past_0"]["sizes"][2] = {"as_expr": {"expr_str": "s0"}}

    p = rewrite(LLAMA, tmp_path / "m.pt2", edit_json("models/model.json", dynamic))
    with pytest.raises(ArchiveError) as e:
        import_pt2(p)
    refused(e, p, "past_0", "dynamic shapes")


def test_custom_op_names_node_target_and_module(tmp_path):
    def custom(doc):
        node(doc, "aten.silu.default")["target"] = "torch.ops.mylib.fancy_act.default"

    p = rewrite(LLAMA, tmp_path / "m.pt2", edit_json("models/model.json", custom))
    with pytest.raises(ImportRefused) as e:
        import_pt2(p)
    refused(e, p, "node 'silu'", "mylib.fancy_act.default", "model.model.layers.0.mlp.act_fn")


def test_attention_scale_checked(tmp_path):
    def scale(doc):
        n = node(doc, "scaled_dot_product_attention.default")
        next(a for a in n["inputs"] if a["name"] == "scale")["arg"] = {"as_float": 0.3}

    p = rewrite(GPT2, tmp_path / "m.pt2", edit_json("models/model.json", scale))
    with pytest.raises(ImportRefused) as e:
        import_pt2(p)
    refused(e, p, "scale 0.3", "1/sqrt(head_dim)")


def test_rope_frequencies_checked_against_theta(tmp_path):
    """Llama-3-style scaled frequencies (the low ones divided by 8) are not a plain theta."""
    arch = read_archive(LLAMA)
    inv = arch.constants["model.model.rotary_emb.inv_freq"].copy()
    inv[4:] = inv[4:] / 8
    cfg = json.loads(zipfile.ZipFile(LLAMA).read("tiny-llama-gqa/data/constants/model_constants_config.json"))
    file = cfg["config"]["model.model.rotary_emb.inv_freq"]["path_name"]

    def scaled(name, data):
        return inv.astype("<f2").tobytes() if name.endswith(f"data/constants/{file}") else data

    p = rewrite(LLAMA, tmp_path / "m.pt2", scaled)
    with pytest.raises(ImportRefused) as e:
        import_pt2(p)
    refused(e, p, "inv_freq", "rope scaling")


def test_a_masked_position_is_refused(tmp_path):
    """A mask that hides a cached position (a padded batch, a sliding window) is not modelled."""

    def hide(doc):
        n = node(doc, "aten.le.Tensor")
        n["target"] = "torch.ops.aten.lt.Tensor"  # kv_idx < q_idx: the new token no longer sees itself

    p = rewrite(GPT2, tmp_path / "m.pt2", edit_json("models/model.json", hide))
    with pytest.raises(ImportRefused) as e:
        import_pt2(p)
    refused(e, p, "attention mask is not causal at position 5")


def test_not_an_archive(tmp_path):
    p = tmp_path / "x.pt2"
    p.write_bytes(b"not a zip")
    with pytest.raises(ArchiveError) as e:
        read_archive(p)
    refused(e, p, "not a torch.export archive")


def test_reader_is_bit_equal_to_the_payload():
    """The raw bytes of a stored weight, as numpy reads them (the fixture's numbers: torch wrote them)."""
    w = read_archive(LLAMA).weights["model.lm_head.weight"]
    assert w.dtype == np.float16 and w.shape == (256, 64)
    with zipfile.ZipFile(LLAMA) as z:
        cfg = json.loads(z.read("tiny-llama-gqa/data/weights/model_weights_config.json"))["config"]
        raw = z.read(f"tiny-llama-gqa/data/weights/{cfg['model.lm_head.weight']['path_name']}")
    assert np.frombuffer(raw, "<f2").reshape(256, 64).tobytes() == w.tobytes()


def test_eager_attention_scale_checked(tmp_path):
    """Eager attention scales the scores after q @ k^T: another factor is refused at the softmax."""

    def scale(doc):
        nodes = doc["graph_module"]["graph"]["nodes"]
        i = next(k for k, n in enumerate(nodes) if n["name"] == "matmul")
        mul = nodes[i + 1]
        assert mul["target"].endswith("aten.mul.Tensor")
        next(a for a in mul["inputs"] if a["name"] == "other")["arg"] = {"as_float": 0.3}

    p = rewrite(FIXTURES / "tiny-llama-gqa-eager.pt2", tmp_path / "m.pt2", edit_json("models/model.json", scale))
    with pytest.raises(ImportRefused) as e:
        import_pt2(p)
    refused(e, p, "softmax of attention scores scaled by 1.2")


def test_static_cache_needs_its_position_and_checks_it():
    static = FIXTURES / "tiny-llama-gqa-static.pt2"
    with pytest.raises(ImportRefused) as e:
        import_pt2(static)
    refused(e, static, "--position is needed", "static cache's position")
    imp = import_pt2(static, position=5)
    step = dict(np.load(FIXTURES / "tiny-llama-gqa-static.npz"))
    with pytest.raises(IRError, match="cache_position"):
        imp.step({**step, "cache_position": np.array([4])})


def test_a_norm_that_only_looks_like_rmsnorm_is_refused(tmp_path):
    """Gemma's RMSNorm scales by (1 + weight): the probe sees it is not pimsat's rmsnorm."""

    def one_plus_w(doc):
        g = doc["graph_module"]["graph"]
        i, mul = next(
            (i, n)
            for i, n in enumerate(g["nodes"])
            if n["target"].endswith("aten.mul.Tensor")
            and "input_layernorm_weight" in json.dumps(n["inputs"])
            and "layers_0" in json.dumps(n["inputs"])
        )
        w = next(a for a in mul["inputs"] if "weight" in json.dumps(a))
        add = {
            "target": "torch.ops.aten.add.Tensor",
            "inputs": [
                {"name": "self", "arg": {"as_tensor": {"name": w["arg"]["as_tensor"]["name"]}}, "kind": 1},
                {"name": "other", "arg": {"as_float": 1.0}, "kind": 1},
            ],
            "outputs": [{"as_tensor": {"name": "one_plus_w"}}],
            "metadata": mul["metadata"],
            "name": "one_plus_w",
        }
        g["tensor_values"]["one_plus_w"] = g["tensor_values"][w["arg"]["as_tensor"]["name"]]
        w["arg"] = {"as_tensor": {"name": "one_plus_w"}}
        g["nodes"].insert(i, add)

    p = rewrite(LLAMA, tmp_path / "m.pt2", edit_json("models/model.json", one_plus_w))
    with pytest.raises(ImportRefused) as e:
        import_pt2(p)
    refused(e, p, "model.model.layers.0.input_layernorm (LlamaRMSNorm)", "computes none of rmsnorm")


def test_unknown_keys_are_ignored(tmp_path):
    """A newer minor version may add keys: the reader ignores what it does not know."""

    def extra(doc):
        doc["some_future_field"] = {"x": 1}
        doc["graph_module"]["graph"]["nodes"][0]["metadata"]["future_meta"] = "y"
        doc["schema_version"]["minor"] = 99

    def extra_cfg(doc):
        doc["future"] = True
        for entry in doc["config"].values():
            entry["future_flag"] = 0

    edit_model, edit_cfg = edit_json("models/model.json", extra), edit_json("model_weights_config.json", extra_cfg)
    p = rewrite(LLAMA, tmp_path / "m.pt2", lambda name, data: edit_cfg(name, edit_model(name, data)))
    assert import_pt2(p, name="same").program == import_pt2(LLAMA, name="same").program
