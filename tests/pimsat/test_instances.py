"""Every instance under instances/ loads, builds its program and hardware, and fits."""

from __future__ import annotations

from pathlib import Path

import pytest

from pimsat.instance import InstanceError, instance_files, load_instance

ROOT = Path(__file__).resolve().parents[2]
ALL = instance_files(ROOT / "instances")


def test_tiers_present():
    tiers = {p.parent.name for p in ALL}
    assert {"fpga", "micro", "small", "llm"} <= tiers
    names = [p.stem for p in ALL]
    assert any("gemv-4096" in n for n in names)


@pytest.mark.parametrize("path", ALL, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_instance_loads_and_fits(path):
    inst = load_instance(path)
    assert inst.tier == path.parent.name
    prog = inst.build_program()
    hw = inst.build_hardware()
    assert prog.weight_bytes() + prog.kv_bytes() <= hw.organization.capacity_bytes


def test_bad_instance_names_file_and_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nprogram: {kind: gemv, n: 0, k: 4}\n")
    with pytest.raises(InstanceError) as e:
        load_instance(bad)
    assert str(e.value).startswith(f"{bad}: program.n:")
    bad.write_text("name: x\nprogram: {kind: gemv, n: 4, k: 4}\nhardware: {preset: hbm2-pim, set: [pim.nope=1]}\n")
    with pytest.raises(InstanceError) as e:
        load_instance(bad)
    assert "pim.nope" in str(e.value)
