"""Malformed programs raise IRError naming the op and the field."""

import pytest

from ir import IRError, Op, Program, Tensor, attention_program


def T(name, shape, dtype="fp16", role="activation"):
    return Tensor(name=name, shape=shape, dtype=dtype, role=role)


def base(**changes):
    """x[1,4] -> gemv(W[3,4]) -> y[1,3] -> silu -> z."""
    spec = dict(
        name="p",
        tensors=[T("x", (1, 4)), T("w", (3, 4), role="weight"), T("y", (1, 3)), T("z", (1, 3))],
        ops=[
            Op(name="g", kind="gemv", inputs=["x", "w"], outputs=["y"]),
            Op(name="act", kind="silu", inputs=["y"], outputs=["z"]),
        ],
        inputs=["x"],
        outputs=["z"],
    )
    spec.update(changes)
    return Program(**spec)


def test_base_is_valid():
    p = base()
    assert [op.name for op in p.topo_order()] == ["g", "act"]


def test_duplicate_tensor_name():
    with pytest.raises(IRError, match="duplicate tensor name 'y'"):
        base(tensors=[T("x", (1, 4)), T("w", (3, 4), role="weight"), T("y", (1, 3)), T("y", (1, 3)), T("z", (1, 3))])


def test_duplicate_op_name():
    with pytest.raises(IRError, match=r"op 'g' \(silu\): name: duplicate op name"):
        base(
            ops=[
                Op(name="g", kind="gemv", inputs=["x", "w"], outputs=["y"]),
                Op(name="g", kind="silu", inputs=["y"], outputs=["z"]),
            ]
        )


def test_unknown_tensor():
    with pytest.raises(IRError, match=r"op 'act' \(silu\): inputs\[0\]: unknown tensor 'nope'"):
        base(
            ops=[
                Op(name="g", kind="gemv", inputs=["x", "w"], outputs=["y"]),
                Op(name="act", kind="silu", inputs=["nope"], outputs=["z"]),
            ]
        )
    with pytest.raises(IRError, match=r"outputs\[0\]: unknown tensor 'q'"):
        base(outputs=["q"])


def test_wrong_weight_shape():
    with pytest.raises(IRError, match=r"op 'g' \(gemv\): inputs\[1\] \(weight\) 'w': shape \(3, 5\)"):
        base(tensors=[T("x", (1, 4)), T("w", (3, 5), role="weight"), T("y", (1, 3)), T("z", (1, 3))])


def test_wrong_output_shape():
    with pytest.raises(IRError, match=r"op 'g' \(gemv\): outputs\[0\] 'y': shape \(1, 4\), expected \(1, 3\)"):
        base(tensors=[T("x", (1, 4)), T("w", (3, 4), role="weight"), T("y", (1, 4)), T("z", (1, 3))])


def test_wrong_role_and_dtype():
    with pytest.raises(IRError, match=r"op 'g' \(gemv\): inputs\[1\] \(weight\) 'w': role is activation"):
        base(tensors=[T("x", (1, 4)), T("w", (3, 4)), T("y", (1, 3)), T("z", (1, 3))], inputs=["x", "w"])
    with pytest.raises(IRError, match=r"op 'act' \(silu\): outputs\[0\] 'z': dtype int32"):
        base(tensors=[T("x", (1, 4)), T("w", (3, 4), role="weight"), T("y", (1, 3)), T("z", (1, 3), "int32")])


def test_operand_count_and_attrs():
    with pytest.raises(IRError, match=r"op 'g' \(gemv\): inputs: got 1 operands"):
        base(
            ops=[
                Op(name="g", kind="gemv", inputs=["x"], outputs=["y"]),
                Op(name="act", kind="silu", inputs=["y"], outputs=["z"]),
            ]
        )
    with pytest.raises(IRError, match=r"op 'act' \(silu\): attrs.eps: unknown attribute"):
        base(
            ops=[
                Op(name="g", kind="gemv", inputs=["x", "w"], outputs=["y"]),
                Op(name="act", kind="silu", inputs=["y"], outputs=["z"], attrs={"eps": 1.0}),
            ]
        )


def test_cycle():
    with pytest.raises(IRError, match=r"cycle: .*a -> b -> a|cycle: .*b -> a -> b"):
        Program(
            name="p",
            tensors=[T("x", (1, 3)), T("y", (1, 3)), T("u", (1, 3)), T("v", (1, 3))],
            ops=[
                Op(name="a", kind="add", inputs=["x", "v"], outputs=["u"]),
                Op(name="b", kind="silu", inputs=["u"], outputs=["v"]),
            ],
            inputs=["x"],
            outputs=["u"],
        )


def test_single_producer():
    with pytest.raises(IRError, match=r"op 'act' \(silu\): outputs\[0\] 'y': is also produced by op 'g'"):
        base(
            ops=[
                Op(name="g", kind="gemv", inputs=["x", "w"], outputs=["y"]),
                Op(name="act", kind="silu", inputs=["y"], outputs=["y"]),
            ]
        )


def test_program_input_and_weight_not_produced():
    with pytest.raises(IRError, match=r"op 'act' \(silu\): outputs: 'x' is a program input"):
        base(
            ops=[
                Op(name="g", kind="gemv", inputs=["x", "w"], outputs=["y"]),
                Op(name="act", kind="silu", inputs=["y"], outputs=["x"]),
            ],
            tensors=[T("x", (1, 3)), T("w", (3, 3), role="weight"), T("y", (1, 3)), T("z", (1, 3))],
            outputs=["y"],
        )
    with pytest.raises(IRError, match=r"program 'p': inputs\[0\] 'w': role weight"):
        base(inputs=["w"])


def test_undefined_activation():
    with pytest.raises(IRError, match=r"op 'g' \(gemv\): inputs\[0\] 'x': activation is neither"):
        base(inputs=[])


def _attention_spec():
    p = attention_program(heads=4, kv_heads=2, head_dim=8, context=3)
    return p.model_dump()


def test_kv_append_naming_and_in_place():
    spec = _attention_spec()
    spec["ops"][0]["outputs"] = ["k_cache@3"]
    Program.model_validate(spec)  # unchanged name is fine
    spec["tensors"]["k_cache@9"] = {**spec["tensors"]["k_cache@3"], "name": "k_cache@9"}
    spec["ops"][0]["outputs"] = ["k_cache@9"]
    with pytest.raises(
        IRError, match=r"op 'k_append' \(kv_append\): outputs\[0\] 'k_cache@9': must be named 'k_cache@3'"
    ):
        Program.model_validate(spec)
    spec = _attention_spec()
    spec["ops"][2]["inputs"][1] = "k_cache"  # read the cache that is being updated in place
    with pytest.raises(IRError, match=r"op 'k_append' \(kv_append\): inputs\[0\] 'k_cache': .*in place"):
        Program.model_validate(spec)


def test_attention_geometry_errors():
    spec = _attention_spec()
    spec["ops"][2]["attrs"]["kv_heads"] = 3
    with pytest.raises(IRError, match=r"op 'scores' \(attn_score\): attrs.kv_heads"):
        Program.model_validate(spec)
    spec = _attention_spec()
    spec["ops"][2]["attrs"]["position"] = 5
    with pytest.raises(IRError, match=r"op 'scores' \(attn_score\): attrs.position: position 5 is outside"):
        Program.model_validate(spec)
    spec = _attention_spec()
    del spec["ops"][4]["attrs"]["head_dim"]
    with pytest.raises(IRError, match=r"op 'context' \(attn_context\): attrs.head_dim: required attribute"):
        Program.model_validate(spec)


def test_json_path_raises_irerror_too():
    p = base()
    bad = p.to_json().replace('"shape":[3,4]', '"shape":[3,5]')
    with pytest.raises(IRError, match=r"op 'g' \(gemv\)"):
        Program.from_json(bad)
