"""Broken hardware files and --set overrides are refused with a message naming file and field."""

import copy

import pytest
import yaml

from hwmodel import HardwareError, load_hardware
from hwmodel.loader import PRESET_DIR, family_timing_table


@pytest.fixture
def base():
    return yaml.safe_load((PRESET_DIR / "hbm2-pim.yaml").read_text())


def _refused(tmp_path, data, *needles):
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(HardwareError) as e:
        load_hardware(str(path))
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(str(path) + ":"), msg
    for needle in needles:
        assert needle in msg, msg
    return msg


def _with_constraint(data, **row):
    data = copy.deepcopy(data)
    data["timing"]["constraints"] = family_timing_table() + [row]
    return data


def test_missing_timing_parameter(tmp_path, base):
    del base["timing"]["params"]["tRCDRD"]
    _refused(tmp_path, base, "timing.params", "missing timing parameter tRCDRD")


def test_negative_parameter(tmp_path, base):
    base["timing"]["params"]["tRP"] = -3
    _refused(tmp_path, base, "timing.params", "tRP", "negative")


@pytest.mark.parametrize("latency", [-5, "tRP - tRC", "-7"])
def test_negative_latency(tmp_path, base, latency):
    n = len(family_timing_table())
    data = _with_constraint(base, prev="ACT", next="PRE", scope="bank", latency=latency)
    _refused(tmp_path, data, f"constraints[{n}]", "ACT->PRE", "negative latency")


def test_unknown_command(tmp_path, base):
    n = len(family_timing_table())
    data = _with_constraint(base, prev="ACT", next="FIRE", scope="bank", latency="tRC")
    _refused(tmp_path, data, f"timing.constraints.{n}.next", "unknown command 'FIRE'")


def test_unknown_scope(tmp_path, base):
    n = len(family_timing_table())
    data = _with_constraint(base, prev="ACT", next="ACT", scope="galaxy", latency="tRC")
    _refused(tmp_path, data, f"timing.constraints.{n}.scope", "unknown scope 'galaxy'")


def test_unknown_parameter_in_latency(tmp_path, base):
    data = _with_constraint(base, prev="ACT", next="ACT", scope="bank", latency="tRC + tXYZ")
    _refused(tmp_path, data, "unknown timing parameter 'tXYZ'")


def test_unknown_key_and_bad_value(tmp_path, base):
    bad = copy.deepcopy(base)
    bad["organization"]["colour"] = "blue"
    _refused(tmp_path, bad, "organization.colour")
    base["organization"]["channels"] = 0
    _refused(tmp_path, base, "organization.channels")


def test_inconsistent_shape(tmp_path, base):
    base["pim"]["banks_per_pu"] = 3
    _refused(tmp_path, base, "pim.banks_per_pu = 3")


def test_not_yaml_and_missing_file(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("organization: [1, 2\n")
    with pytest.raises(HardwareError, match="not valid YAML"):
        load_hardware(str(path))
    with pytest.raises(HardwareError, match="cannot read"):
        load_hardware(str(tmp_path / "absent.yaml"))
    with pytest.raises(HardwareError, match="unknown hardware preset 'nope'"):
        load_hardware("nope")


def test_overrides_apply():
    hw = load_hardware("hbm2-pim", ["pim.lanes=32", "organization.channels=8", "timing.params.tRCDRD=20"])
    assert hw.pim.lanes == 32
    assert hw.organization.channels == 8
    assert hw.timing.p("tRCDRD") == 20
    assert load_hardware("hbm2-pim").timing.p("tRCDRD") == 14  # the preset is untouched


def test_a_version_override_is_read_as_written():
    """`--set isa_version=1.5` (YAML would read a float) and "1.5" quoted give the same device."""
    assert load_hardware("hbm2-pim", ["isa_version=1.5"]).isa_version == "1.5"
    assert load_hardware("hbm2-pim", ['isa_version="1.5"']).isa_version == "1.5"
    with pytest.raises(HardwareError, match="ISA 1.10 is not implemented"):
        load_hardware("hbm2-pim", ["isa_version=1.10"])


def test_a_timing_row_is_overridden_by_its_index():
    """`timing.constraints[I].FIELD=V` (issue 18: a row of the timing table as a sweep axis): the
    simulator's table and the rule-derived figures (the hardware bound) follow it, the preset's
    parameter does not move."""
    from sim.timing import compile_tables

    base = load_hardware("hbm2-pim")
    i = next(k for k, c in enumerate(base.timing.constraints) if (c.prev, c.next, c.scope) == ("ACT", "MAC", "bank"))
    hw = load_hardware("hbm2-pim", [f"timing.constraints[{i}].latency=tRCDMAC + 6"])
    assert hw.timing.constraints[i].latency == "tRCDMAC + 6" and hw.timing.p("tRCDMAC") == base.timing.p("tRCDMAC")
    assert hw.timing.rule("ACT", "MAC", "bank") == base.timing.p("tRCDMAC") + 6
    assert int(compile_tables(hw).lat[i]) == base.timing.p("tRCDMAC") + 6
    same = load_hardware("hbm2-pim", [f"timing.constraints.{i}.latency=20"])  # dotted index too
    assert same.timing.latency_of(same.timing.constraints[i]) == 20
    assert [c for k, c in enumerate(hw.timing.constraints) if k != i] == [
        c for k, c in enumerate(base.timing.constraints) if k != i
    ]


@pytest.mark.parametrize(
    "item, needles",
    [
        ("timing.constraints[999].latency=3", ["--set timing.constraints[999]", "no field", "rows 0.."]),
        ("timing.constraints[4].latncy=3", ["no field timing.constraints.4.latncy", "known: latency"]),
        ("timing.constraints[4].latency=tFOO", ["--set timing.constraints[4]", "unknown timing parameter 'tFOO'"]),
        ("timing.constraints[4].scope=die", ["--set timing.constraints[4]", "unknown scope 'die'"]),
        ("pim.bogus=1", ["--set pim.bogus", "no field pim.bogus"]),
        ("bogus.lanes=1", ["--set bogus.lanes", "no field bogus"]),
        ("organization.channels.x=1", ["no field organization.channels.x"]),
        ("pim.lanes", ["expected KEY=VALUE"]),
        ("pim.lanes=[1", ["--set pim.lanes", "cannot parse value"]),
        ("pim.lanes=0", ["pim.lanes", "greater than or equal to 1"]),
        ("timing.params.tRP=-1", ["timing.params", "tRP", "negative"]),
    ],
)
def test_overrides_refused(item, needles):
    with pytest.raises(HardwareError) as e:
        load_hardware("hbm2-pim", [item])
    for needle in needles:
        assert needle in str(e.value), str(e.value)


def test_derived_link_parameter_is_refused_in_a_preset(tmp_path, base):
    base["timing"]["params"]["tLINK"] = 2
    _refused(tmp_path, base, "timing.params.tLINK", "derived", "host.link_bytes_per_cycle")


def test_link_parameter_follows_the_link_width():
    assert load_hardware("hbm2-pim").link_cycles == 2  # 32 B bursts, 16 B/cycle
    assert load_hardware("hbm2-pim", ["host.link_bytes_per_cycle=5"]).link_cycles == 7  # 6.4 -> 7
    assert load_hardware("hbm2-pim", ["host.link_bytes_per_cycle=64"]).link_cycles == 1


def test_spec_round_trips_and_follows_overrides():
    from hwmodel.loader import apply_overrides, hardware_from_dict

    hw = load_hardware("hbm3-pim")
    assert "tLINK" not in hw.spec()["timing"]["params"]
    assert hardware_from_dict(hw.spec()) == hw
    narrow = hardware_from_dict(apply_overrides(hw.spec(), ["host.link_bytes_per_cycle=4"], "x"))
    assert narrow.link_cycles == 8
