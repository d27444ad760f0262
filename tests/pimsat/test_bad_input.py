"""A corpus of bad input, by category: every case is refused with ONE line on stderr,
`pimsat: error: <file or option>: <field>: <reason>`, exit status 2 and no traceback; a few
valid inputs next to them must still be accepted.

Each case is (id, how to build it in tmp_path, expected substrings). A builder returns the CLI
arguments; the first expected substring is where (file or option), the others the field/reason.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from hwmodel.loader import PRESET_DIR
from pimsat.cli import main

ROOT = Path(__file__).resolve().parents[2]
GEMV = ROOT / "instances" / "fpga" / "gemv-64x128-fpga.yaml"
FPGA_HW = PRESET_DIR / "fpga-proto.yaml"


def cli(args):
    r = CliRunner().invoke(main, [str(a) for a in args])
    return r


def refused(args, *needles):
    r = cli(args)
    err = r.stderr
    assert r.exception is None or isinstance(r.exception, SystemExit), (
        f"uncaught {type(r.exception).__name__}: {r.exception}"
    )
    assert "Traceback" not in err and "Traceback" not in r.stdout
    assert r.exit_code == 2, (r.exit_code, err, r.stdout[-500:])
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("pimsat: error: "), err
    for n in needles:
        assert str(n) in lines[0], (n, lines[0])
    assert ".tmp-" not in lines[0] and ".old-" not in lines[0], lines[0]
    return lines[0]


def accepted(args):
    r = cli(args)
    assert r.exit_code == 0, (r.exit_code, r.stderr, r.exception)
    return r


def write(path: Path, data) -> Path:
    if isinstance(data, bytes):
        path.write_bytes(data)
    elif isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def instance(**program) -> dict:
    return {"name": "bad", "tier": "adhoc", "program": program, "hardware": {"preset": "fpga-proto"}}


def model(**config) -> dict:
    base = {
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_hidden_layers": 1,
        "vocab_size": 64,
    }
    base.update(config)
    return instance(
        kind="model", config={k: v for k, v in base.items() if v is not None}, layers=1, embed=False, lm_head=False
    )


GARBAGE = bytes(range(256)) * 3


# --- 1. files that are not UTF-8 text ------------------------------------------------------------
def _latin1_instance(t):
    return ["show", write(t / "i.yaml", GEMV.read_bytes().replace(b"GEMV", b"GEMV caf\xe9"))]


def _garbage_instance(t):
    return ["show", write(t / "g.yaml", GARBAGE)]


def _garbage_json_instance(t):
    return ["show", write(t / "g.json", b"\xff\xfe{\x00}")]


def _latin1_hardware(t):
    return ["hw", write(t / "h.yaml", FPGA_HW.read_bytes().replace(b"name: fpga-proto", b"name: fpga-\xe9"))]


def _garbage_hardware(t):
    return ["hw", write(t / "h.yaml", GARBAGE)]


def _hw_via_solve(t):
    return ["solve", GEMV, "--method", "naive", "--hw", write(t / "h.yaml", GARBAGE)]


ENCODING = [
    ("instance-latin1", _latin1_instance, ["i.yaml", "UTF-8"]),
    ("instance-garbage", _garbage_instance, ["g.yaml", "UTF-8"]),
    ("instance-json-utf16", _garbage_json_instance, ["g.json", "UTF-8"]),
    ("hardware-latin1", _latin1_hardware, ["h.yaml", "UTF-8"]),
    ("hardware-garbage", _garbage_hardware, ["h.yaml", "UTF-8"]),
    ("hardware-garbage-solve", _hw_via_solve, ["h.yaml", "UTF-8"]),
]


@pytest.mark.parametrize("build,needles", [c[1:] for c in ENCODING], ids=[c[0] for c in ENCODING])
def test_not_utf8(tmp_path, build, needles):
    refused(build(tmp_path), *[tmp_path / needles[0], *needles[1:]])


# --- 2. options out of range ---------------------------------------------------------------------
S = ["solve", GEMV, "--method", "naive"]
OPTIONS = [
    ("workers-0", S + ["--workers", "0"], ["--workers"]),
    ("workers-huge", S + ["--workers", "100000"], ["--workers"]),
    ("workers-2^40", S + ["--workers", str(2**40)], ["--workers"]),
    ("seed-int32+1", S + ["--seed", str(2**31)], ["--seed"]),
    ("seed-int32-1", S + ["--seed", str(-(2**31) - 1)], ["--seed"]),
    ("seed-2^70", S + ["--seed", str(2**70)], ["--seed"]),
    ("seed-text", S + ["--seed", "abc"], ["--seed"]),
    ("dtime-negative", S + ["--deterministic-time", "-1"], ["--deterministic-time"]),
    ("dtime-inf", S + ["--deterministic-time", "inf"], ["--deterministic-time"]),
    ("dtime-nan", S + ["--deterministic-time", "nan"], ["--deterministic-time"]),
    ("time-limit-inf", S + ["--time-limit", "inf"], ["--time-limit"]),
    ("time-limit-nan", S + ["--time-limit", "nan"], ["--time-limit"]),
    ("time-limit-zero", S + ["--time-limit", "0"], ["--time-limit"]),
    ("time-limit-cpsat-inf", ["solve", GEMV, "--time-limit", "inf"], ["--time-limit"]),
    ("groups-0", S + ["--groups", "0"], ["--groups"]),
    ("method-unknown", ["solve", GEMV, "--method", "magic"], ["--method"]),
    ("option-unknown", S + ["--bogus"], ["--bogus"]),
    ("out-empty", S + ["--out", ""], ["--out"]),
    ("compare-csv-empty", ["compare", GEMV, "--methods", "naive", "--csv", ""], ["--csv"]),
    ("compare-json-empty", ["compare", GEMV, "--methods", "naive", "--json", ""], ["--json"]),
    ("simulate-trace-empty", ["simulate", ROOT / "nowhere", "--trace", ""], ["--trace"]),
    ("demo-time-limit-negative", ["demo", "--time-limit", "-5"], ["--time-limit"]),
    ("demo-time-limit-nan", ["demo", "--time-limit", "nan"], ["--time-limit"]),
    ("compare-methods-comma", ["compare", GEMV, "--methods", ","], ["--methods"]),
    ("compare-methods-unknown", ["compare", GEMV, "--methods", "naive,magic"], ["--methods", "magic"]),
    ("compare-time-limit-inf", ["compare", GEMV, "--methods", "naive", "--time-limit", "inf"], ["--time-limit"]),
    ("bench-tier-unknown", ["bench", "--tier", "nosuchtier"], ["--tier", "nosuchtier"]),
    ("bench-time-limit-negative", ["bench", "--tier", "fpga", "--time-limit", "-5"], ["--time-limit"]),
]


@pytest.mark.parametrize("args,needles", [c[1:] for c in OPTIONS], ids=[c[0] for c in OPTIONS])
def test_option_out_of_range(args, needles):
    refused(args, *needles)


# --- 3. model configs whose dimensions are zero, negative or do not fit -----------------------
CONFIGS = [
    ("heads-zero", model(num_attention_heads=0), ["num_attention_heads"]),
    ("kv-heads-zero", model(num_key_value_heads=0), ["num_key_value_heads"]),
    ("hidden-negative", model(hidden_size=-64), ["hidden_size"]),
    ("head-dim-zero", model(head_dim=0), ["head_dim"]),
    ("vocab-zero", model(vocab_size=0), ["vocab_size"]),
    ("not-divisible", model(num_attention_heads=5), ["hidden_size", "heads"]),
    ("kv-not-dividing", model(num_key_value_heads=3), ["num_key_value_heads"]),
    ("hidden-text", model(hidden_size="big"), ["hidden_size"]),
    ("hidden-float", model(hidden_size=64.5), ["hidden_size"]),
    (
        "gpt2-heads-zero",
        model(
            model_type="gpt2",
            n_embd=64,
            n_layer=1,
            n_head=0,
            hidden_size=None,
            intermediate_size=None,
            num_attention_heads=None,
            num_hidden_layers=None,
        ),
        ["n_head"],
    ),
    ("model-type-unknown", model(model_type="bert"), ["model_type", "bert", "llama"]),
    ("missing-field", model(vocab_size=None), ["vocab_size"]),
    ("dtype-unknown", model(torch_dtype="int4"), ["torch_dtype"]),
]


@pytest.mark.parametrize("data,needles", [c[1:] for c in CONFIGS], ids=[c[0] for c in CONFIGS])
def test_model_config(tmp_path, data, needles):
    path = write(tmp_path / "m.yaml", data)
    refused(["show", path], path, "program.config", *needles)


# --- 4. instance fields and YAML / JSON structure ---------------------------------------------
def _bomb(levels=9):
    lines = [
        "name: bomb",
        "program: {kind: gemv, n: 64, k: 128}",
        "hardware: {preset: fpga-proto}",
        "description: x",
        "x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]",
    ]
    for i in range(1, levels):
        lines.append(f"x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]")
    return "\n".join(lines) + "\n"


def _config_bomb(levels=9):
    rows = ["    a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    rows += [f"    a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    cfg = yaml.safe_dump(model()).replace("  config:\n", "  config:\n" + "\n".join(rows) + "\n", 1)
    return cfg


INSTANCES = [
    (
        "seed-negative-functional",
        lambda t: ["solve", write(t / "i.yaml", {**yaml.safe_load(GEMV.read_text()), "seed": -1}), "--method", "naive"],
        ["i.yaml", "seed"],
    ),
    (
        "seed-text",
        lambda t: ["show", write(t / "i.yaml", {**yaml.safe_load(GEMV.read_text()), "seed": "x"})],
        ["i.yaml", "seed"],
    ),
    (
        "yaml-syntax-line-column",
        lambda t: ["show", write(t / "i.yaml", "name: a\nprogram: {kind: gemv\n")],
        ["i.yaml", "line 3", "column"],
    ),
    (
        "yaml-tab",
        lambda t: ["show", write(t / "i.yaml", "name: a\nprogram:\n\tkind: gemv\n")],
        ["i.yaml", "line 3", "column"],
    ),
    # PyYAML keeps the last of two equal keys without a word: the first `seed` would be ignored
    (
        "yaml-duplicate-key",
        lambda t: ["show", write(t / "i.yaml", "name: a\nseed: 1\nprogram: {kind: gemv, n: 8, k: 16}\nseed: 2\n")],
        ["i.yaml", "line 4", "duplicate key 'seed'"],
    ),
    (
        "json-syntax-line-column",
        lambda t: ["show", write(t / "i.json", '{"name": "a",\n "program": }')],
        ["i.json", "line 2", "column"],
    ),
    ("alias-bomb-top", lambda t: ["show", write(t / "b.yaml", _bomb())], ["b.yaml", "alias"]),
    ("alias-bomb-config", lambda t: ["show", write(t / "b.yaml", _config_bomb())], ["b.yaml", "alias"]),
    (
        "alias-recursive",
        lambda t: [
            "show",
            write(
                t / "r.yaml",
                yaml.safe_dump(model()).replace("model_type: llama", "model_type: llama\n    loop: &l [*l]"),
            ),
        ],
        ["r.yaml"],
    ),
    (
        "nesting-deep",
        lambda t: ["show", write(t / "d.yaml", "name: " + "[" * 20000 + "]" * 20000 + "\n")],
        ["d.yaml", "nest"],
    ),
    ("json-nesting-deep", lambda t: ["show", write(t / "d.json", "[" * 200000 + "]" * 200000)], ["d.json", "nest"]),
]


@pytest.mark.parametrize("build,needles", [c[1:] for c in INSTANCES], ids=[c[0] for c in INSTANCES])
def test_instance_file(tmp_path, build, needles):
    refused(build(tmp_path), *[tmp_path / needles[0], *needles[1:]])


# --- 5. hardware files and --set overrides ----------------------------------------------------
def _hw(t, **top):
    data = yaml.safe_load(FPGA_HW.read_text())
    data.update(top)
    return write(t / "h.yaml", data)


def _set_in_instance(t):
    data = {**yaml.safe_load(GEMV.read_text()), "hardware": {"preset": "fpga-proto", "set": ["pim.lanes=0"]}}
    return ["show", write(t / "i.yaml", data)]


HARDWARE = [
    ("isa-9.0", lambda t: ["hw", _hw(t, isa_version="9.0")], ["h.yaml", "isa_version", "9.0"]),
    ("isa-1.99", lambda t: ["hw", _hw(t, isa_version="1.99")], ["h.yaml", "isa_version"]),
    ("isa-not-a-version", lambda t: ["hw", _hw(t, isa_version="latest")], ["h.yaml", "isa_version"]),
    ("yaml-syntax", lambda t: ["hw", write(t / "h.yaml", "name: x\norganization: [\n")], ["h.yaml", "line", "column"]),
    (
        "alias-bomb",
        lambda t: ["hw", write(t / "h.yaml", FPGA_HW.read_text() + _bomb().split("description: x\n")[1])],
        ["h.yaml", "alias"],
    ),
    ("set-negative", lambda t: ["hw", "fpga-proto", "--set", "pim.lanes=-3"], ["--set pim.lanes=-3", "lanes"]),
    (
        "set-text",
        lambda t: ["hw", "fpga-proto", "--set", "organization.channels=many"],
        ["--set organization.channels=many", "channels"],
    ),
    (
        "set-solve",
        lambda t: ["solve", GEMV, "--method", "naive", "--set", "pim.lanes=0"],
        ["--set pim.lanes=0", "lanes"],
    ),
    ("set-in-instance", _set_in_instance, ["i.yaml", "hardware.set", "pim.lanes=0", "lanes"]),
    ("set-unknown-field", lambda t: ["hw", "fpga-proto", "--set", "pim.wings=2"], ["--set pim.wings", "wings"]),
]


@pytest.mark.parametrize("build,needles", [c[1:] for c in HARDWARE], ids=[c[0] for c in HARDWARE])
def test_hardware(tmp_path, build, needles):
    needles = [str(tmp_path / n) if n.endswith(".yaml") else n for n in needles]
    refused(build(tmp_path), *needles)


# --- 6. stream directories: manifests and streams -------------------------------------------
@pytest.fixture(scope="module")
def streams(tmp_path_factory):
    out = tmp_path_factory.mktemp("good") / "run"
    accepted(["solve", GEMV, "--method", "naive", "--out", out, "--json"])
    return out / "streams"


def _manifest(edit):
    def build(t, src):
        d = t / "s"
        shutil.copytree(src, d)
        text = (d / "manifest.json").read_text()
        m = json.loads(text)
        new = edit(m, d)
        if isinstance(new, bytes):
            (d / "manifest.json").write_bytes(new)
        elif isinstance(new, str):
            (d / "manifest.json").write_text(new)
        else:
            (d / "manifest.json").write_text(json.dumps(m))
        return ["simulate", d]

    return build


def _set(key, value):
    def edit(m, d):
        node = m
        *path, leaf = key.split(".")
        for p in path:
            node = node[int(p)] if isinstance(node, list) else node[p]
        node[leaf] = value

    return edit


def _asm_stamp(m, d, stamp=(1 << 64) - 2):
    (d / "ch00.bin").unlink()
    lines = (d / "ch00.s").read_text().splitlines()
    lines[-1] = f"@{stamp} " + lines[-1].split(" ", 1)[1]
    (d / "ch00.s").write_text("\n".join(lines) + "\n")


def _bin_stamp(m, d):
    import struct

    data = bytearray((d / "ch00.bin").read_bytes())
    hdr = len(data) - 24 * m["files"]["channels"][0]["instructions"]
    struct.pack_into("<Q", data, len(data) - 24, (1 << 63) + 5)
    (d / "ch00.bin").write_bytes(bytes(data))
    assert hdr > 0


def _asm_latin1(m, d):
    (d / "ch00.bin").unlink()
    (d / "ch00.s").write_bytes((d / "ch00.s").read_bytes().replace(b"-- fpga", b"-- \xe9 fpga"))


MANIFEST = "manifest.json"
STREAMS = [
    (
        "manifest-latin1",
        lambda m, d: (d / MANIFEST).read_bytes().replace(b"fpga-proto", b"fpga-\xe9", 1),
        [MANIFEST, "UTF-8"],
    ),
    ("manifest-garbage", lambda m, d: GARBAGE, [MANIFEST, "UTF-8"]),
    (
        "manifest-syntax",
        lambda m, d: (d / MANIFEST).read_text().replace('"channels": 2', '"channels": 2,,'),
        [MANIFEST, "line 7", "column"],
    ),
    ("channels-text", _set("channels", "2"), [MANIFEST, "channels"]),
    ("files-list", _set("files", []), [MANIFEST, "files"]),
    ("files-instructions-text", _set("files.channels.0.instructions", "69"), [MANIFEST, "instructions"]),
    ("files-bin-number", _set("files.channels.0.bin", 5), [MANIFEST, "bin"]),
    ("symbols-number", _set("symbols", 5), [MANIFEST, "symbols"]),
    ("placements-text", _set("placements", "x"), [MANIFEST, "placements"]),
    ("placements-short", _set("placements", [[1, 2]]), [MANIFEST, "placements"]),
    ("placement-fields-text", _set("placement_fields", "abc"), [MANIFEST, "placement_fields"]),
    ("seed-text", _set("seed", "abc"), [MANIFEST, "seed"]),
    ("seed-negative", _set("seed", -1), [MANIFEST, "seed"]),
    ("hardware-spec-text", _set("hardware_spec", "x"), [MANIFEST, "hardware_spec"]),
    ("hardware-spec-lanes", _set("hardware_spec.pim.lanes", 0), [MANIFEST, "lanes"]),
    ("program-number", _set("program", 5), [MANIFEST, "program"]),
    ("program-missing-ops", _set("program", {"name": "p"}), [MANIFEST, "program"]),
    ("hardware-number", _set("hardware", 5), [MANIFEST, "hardware"]),
    ("stamp-near-2^64-asm", _asm_stamp, ["ch00.s", "stamp"]),
    ("stamp-2^63-bin", _bin_stamp, ["ch00.bin", "cycle"]),
    ("asm-latin1", _asm_latin1, ["ch00.s", "UTF-8"]),
    ("bin-garbage", lambda m, d: (d / "ch00.bin").write_bytes(GARBAGE), ["ch00.bin"]),
]


@pytest.mark.parametrize("edit,needles", [c[1:] for c in STREAMS], ids=[c[0] for c in STREAMS])
def test_streams(tmp_path, streams, edit, needles):
    args = _manifest(edit)(tmp_path, streams)
    refused(args, tmp_path / "s" / needles[0], *needles[1:])


# --- accepted: valid inputs next to the refused ones ------------------------------------------
def _utf8_aliases(t):
    text = (
        GEMV.read_text()
        .replace("description: GEMV", "description: GEMV – café ✓")
        .replace("seed: 0", "seed: &s 0\nx_note_unused: null")
        .replace("x_note_unused: null\n", "")
    )
    return ["show", write(t / "ok.yaml", text)]


def _small_aliases(t):
    data = yaml.safe_load(GEMV.read_text())
    data.pop("description", None)  # (appended below: a second `description` would be a duplicate key)
    text = yaml.safe_dump(data).replace("preset: fpga-proto", "preset: &p fpga-proto")
    return ["show", write(t / "ok.yaml", text + "description: *p\n")]


ACCEPTED = [
    ("show-yaml", lambda t: ["show", GEMV]),
    ("show-json", lambda t: ["show", write(t / "ok.json", json.dumps(yaml.safe_load(GEMV.read_text())))]),
    ("show-utf8", _utf8_aliases),
    ("show-small-aliases", _small_aliases),
    ("show-model-mistral", lambda t: ["show", write(t / "m.yaml", model(model_type="mistral", num_key_value_heads=2))]),
    (
        "show-model-gpt2",
        lambda t: [
            "show",
            write(
                t / "m.yaml",
                model(
                    model_type="gpt2",
                    n_embd=64,
                    n_layer=1,
                    n_head=4,
                    hidden_size=None,
                    intermediate_size=None,
                    num_attention_heads=None,
                    num_hidden_layers=None,
                ),
            ),
        ],
    ),
    ("hw-file", lambda t: ["hw", _hw(t)]),
    ("hw-set", lambda t: ["hw", "fpga-proto", "--set", "pim.lanes=8"]),
    (
        "solve-options-at-bounds",
        lambda t: S + ["--workers", "64", "--seed", str(2**31 - 1), "--deterministic-time", "0", "--time-limit", "0.5"],
    ),
    ("solve-seed-negative-int32", lambda t: S + ["--seed", str(-(2**31))]),
    ("compare-trailing-comma", lambda t: ["compare", GEMV, "--methods", "naive,"]),
]


@pytest.mark.parametrize("build", [c[1] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_accepted(tmp_path, build):
    accepted(build(tmp_path))


def test_valid_streams_still_simulate(streams):
    r = accepted(["simulate", streams, "--json"])
    assert json.loads(r.stdout)["outputs_match"] is True
