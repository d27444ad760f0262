"""Bring-up bundles without an HDL simulator: schema, hashes, what `pimsat simulate` makes of the
bundle's streams, the golden files against the simulator, and the one-line refusals."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from click.testing import CliRunner

import sim
from hwmodel.streams_io import read_streams
from ir import generate_inputs, generate_state
from pimsat.bringup.images import parse_burst_lines
from pimsat.cli import main
from pimsat.stream_inputs import manifest_inputs

from .conftest import ROOT, copy_bundle


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_manifest_validates_against_its_published_schema(bundle):
    r = cli("schema", "bundle")
    assert r.exit_code == 0, r.output
    manifest = json.loads((bundle / "manifest.json").read_text())
    jsonschema.validate(manifest, json.loads(r.output))
    assert manifest["isa_version"] == manifest["hardware"]["isa_version"]
    assert manifest["instance"]["tier"] == "fpga" and manifest["hardware"]["name"] == "fpga-proto"
    files = set(manifest["files"])
    for c in manifest["channels"]:
        assert {
            f"memory/{c['stem']}_b0.hex",
            f"program/{c['stem']}.words.hex",
            f"golden/{c['stem']}.rdacc.hex",
        } <= files


def test_check_bundle_passes_and_other_schemas_still_print(bundle):
    r = cli("check-bundle", bundle)
    assert r.exit_code == 0 and "ok" in r.output, r.output
    for what in ("instance", "hardware"):
        assert "properties" in json.loads(cli("schema", what).output)


def test_simulate_on_the_bundle_streams_reproduces_the_golden_results(bundle):
    m = json.loads((bundle / "manifest.json").read_text())
    streams, manifest = read_streams(bundle / "streams")
    hw, program, seed = manifest_inputs(bundle / "streams", manifest, None, [])
    res = sim.simulate(hw, streams, program, generate_state(program, seed=seed), generate_inputs(program, seed=seed))
    assert res.cycles == m["golden"]["cycles"]
    for o in m["golden"]["outputs"]:
        want = np.load(bundle / o["npy"])
        assert want.dtype == res.outputs[o["name"]].dtype
        assert np.array_equal(want.view(np.uint8), res.outputs[o["name"]].view(np.uint8))
        bits = [int(x, 16) for x in (bundle / o["hex"]).read_text().split()]
        assert bits == want.reshape(-1).view(np.uint16 if want.itemsize == 2 else np.uint32).tolist()
    r = cli("simulate", bundle / "streams", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["cycles"] == m["golden"]["cycles"] and out["bit_exact"] is True and out["program_modified"] is False


def test_golden_files_agree_with_the_manifest(bundle):
    m = json.loads((bundle / "manifest.json").read_text())
    for c in m["channels"]:
        g = bundle / "golden"
        summary = [int(x, 16) for x in (g / f"{c['stem']}.summary.hex").read_text().split()]
        assert summary == [c["commands"], c["done_cycle"], 0]
        assert len((g / f"{c['stem']}.cmdlog.hex").read_text().split()) == c["commands"]
        assert len((g / f"{c['stem']}.rdacc.hex").read_text().split()) == c["rdacc_values"]
        assert c["done_cycle"] <= m["golden"]["cycles"]
        words = (bundle / "program" / f"{c['stem']}.words.hex").read_text().split()
        assert len(words) == c["instructions"] and all(len(w) == 32 for w in words)
    assert sum(c["rdacc_values"] + c["rd_bursts"] for c in m["channels"]) > 0


def test_bank_image_holds_the_placed_weights(gemv_bundle):
    """memory/ch00_b0.hex, line row*columns + col, lane j: element of the placement (address map)."""
    m = json.loads((gemv_bundle / "manifest.json").read_text())
    streams, manifest = read_streams(gemv_bundle / "streams")
    hw, program, seed = manifest_inputs(gemv_bundle / "streams", manifest, None, [])
    state = generate_state(program, seed=seed)
    e, cols = hw.elements_per_burst, m["hardware"]["organization"]["columns"]
    images = {}
    for p in streams.placements[:6]:
        key = (p.channel, p.bank)
        if key not in images:
            images[key] = parse_burst_lines((gemv_bundle / f"memory/ch{p.channel:02d}_b{p.bank}.hex").read_text(), e)
        flat = np.asarray(state[p.tensor], dtype=np.float16).reshape(-1)
        for i in range(p.run * p.count):
            elem = p.elem_start + (i // p.run) * p.stride + i % p.run
            line, lane = (p.row * cols + p.col) + i // e, i % e
            assert images[key][line, lane] == flat[elem]


def test_export_from_a_solve_folder_gives_the_same_golden_results(gemv_bundle, tmp_path):
    inst = ROOT / "instances" / "fpga" / "gemv-64x128-fpga.yaml"
    assert cli("solve", inst, "--out", tmp_path / "s").exit_code == 0
    r = cli("export-fpga", tmp_path / "s", "--out", tmp_path / "b")
    assert r.exit_code == 0, r.output
    assert cli("check-bundle", tmp_path / "b").exit_code == 0
    a = json.loads((gemv_bundle / "manifest.json").read_text())["files"]
    b = json.loads((tmp_path / "b" / "manifest.json").read_text())["files"]
    for rel in a:
        if rel.startswith(("golden/", "memory/", "program/ch", "host/")):
            assert a[rel] == b[rel], rel


def _one_line_exit_2(r, *words):
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1, r.output
    for w in words:
        assert w in lines[0], lines[0]


def test_an_instance_that_does_not_fit_the_prototype_is_refused(tmp_path):
    r = cli("export-fpga", ROOT / "instances/micro/gemv-4096-hbm2-64ch.yaml", "--out", tmp_path / "b")
    _one_line_exit_2(r, "gemv-4096-hbm2-64ch.yaml", "organization.channels", "FPGA prototype")
    assert not (tmp_path / "b").exists()


def test_a_per_bank_refresh_device_is_refused(tmp_path):
    """The RTL model refreshes all banks (no REFSB): a bundle for a per-bank device would be one
    the RTL cannot replay, so export-fpga refuses it in one line, writing nothing."""
    inst = tmp_path / "pb.yaml"
    inst.write_text(
        "name: pb\nprogram: {kind: gemv, n: 64, k: 128}\n"
        "hardware: {preset: fpga-proto, set: ['timing.refresh_mode=per_bank']}\n"
    )
    r = cli("export-fpga", inst, "--out", tmp_path / "b")
    _one_line_exit_2(r, "pb.yaml", "timing.refresh_mode = per_bank", "all-bank refresh only")
    assert not (tmp_path / "b").exists()


def test_an_output_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "f").write_text("keep me")
    r = cli("export-fpga", ROOT / "instances/fpga/gemv-64x128-fpga.yaml", "--out", tmp_path / "f")
    _one_line_exit_2(r, str(tmp_path / "f"), "not a folder")
    assert (tmp_path / "f").read_text() == "keep me"


@pytest.mark.parametrize("damage", ["missing", "altered", "extra", "manifest"])
def test_a_damaged_bundle_is_refused_naming_the_file(gemv_bundle, tmp_path, damage):
    b = copy_bundle(gemv_bundle, tmp_path / "b")
    target = b / "golden" / "ch00.rdacc.hex"
    if damage == "missing":
        target.unlink()
        words = ["ch00.rdacc.hex", "missing"]
    elif damage == "altered":
        text = target.read_text()
        target.write_text(("0" if text[0] != "0" else "1") + text[1:])
        words = ["ch00.rdacc.hex", "altered", "sha256"]
    elif damage == "extra":
        (b / "golden" / "stray.hex").write_text("0\n")
        words = ["stray.hex", "not listed"]
    else:
        m = json.loads((b / "manifest.json").read_text())
        m["channels"][0]["commands"] = -1
        (b / "manifest.json").write_text(json.dumps(m))
        words = ["manifest.json", "channels.0.commands"]
    _one_line_exit_2(cli("check-bundle", b), *words)


def test_an_interrupted_export_leaves_the_old_bundle(gemv_bundle, tmp_path):
    """SIGTERM while the new bundle is being built: exit 143, the old bundle intact, no temporaries."""
    import os
    import subprocess
    import sys

    b = copy_bundle(gemv_bundle, tmp_path / "b")
    before = (b / "manifest.json").read_bytes()
    pimsat = str(Path(sys.executable).parent / "pimsat")
    inst = ROOT / "instances/fpga/gemv-64x128-fpga.yaml"
    env = {**os.environ, "PIMSAT_TEST_PAUSE_AT": "built:SIGTERM"}
    r = subprocess.run(
        [pimsat, "export-fpga", str(inst), "--out", str(b), "--method", "greedy"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 143, r.stderr
    assert (b / "manifest.json").read_bytes() == before
    assert cli("check-bundle", b).exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]
