"""Every preset validates; the derived figures are sane; the GEMV anchor holds."""

import math

import pytest

from hwmodel import load_hardware, preset_names
from hwmodel.derived import figures, internal_bytes_per_cycle


def test_presets_listed():
    assert {"hbm2-pim", "gddr6-aim", "hbm3-pim", "fpga-proto"} <= set(preset_names())


@pytest.mark.parametrize("name", preset_names())
def test_preset_validates_and_figures_sane(name):
    hw = load_hardware(name)
    assert hw.name == name
    assert hw.organization.banks_per_channel % hw.pim.banks_per_pu == 0
    assert hw.mac_interval >= 1 and hw.gb_bursts >= 1
    figs = {(f.name, f.unit): f.value for f in figures(hw)}
    for key, value in figs.items():
        assert math.isfinite(value) and value > 0, key
    assert figs[("internal / external", "x")] >= 1
    assert figs[("refresh overhead", "%")] < 15
    for c in hw.timing.constraints:
        assert hw.timing.latency_of(c) >= 0


def test_hbm2_pim_gemv_anchor():
    hw = load_hardware("hbm2-pim")
    assert hw.organization.channels == 64
    assert hw.total_pus == 512
    assert internal_bytes_per_cycle(hw) == 4096
    figs = {(f.name, f.unit): f.value for f in figures(hw)}
    assert figs[("aggregate internal bandwidth", "B/cycle")] == 4096
    weight_bytes = 4096 * 4096 * hw.pim.element_bytes
    assert weight_bytes == 32 * 2**20
    assert weight_bytes / internal_bytes_per_cycle(hw) == 8192


@pytest.mark.parametrize("name", ["hbm2-pim", "hbm3-pim"])
def test_stack_capacity_16_gib(name):
    assert load_hardware(name).organization.capacity_bytes == 16 * 2**30


def test_hbm3_pim_has_1024_banks():
    hw = load_hardware("hbm3-pim")
    assert hw.organization.channels * hw.organization.banks_per_channel == 1024


def test_host_address_map_packs_symbols_in_order():
    from hwmodel.host_memory import pack

    m = pack([(3, 10), (0, 4), (7, 1)])
    assert m.bases == {3: 0, 0: 10, 7: 14} and m.words == 15
    assert m.entry(0) == (10 << 32) | 4 and m.entry(5) == 0  # a symbol with no image: 0
    with pytest.raises(ValueError, match="twice"):
        pack([(1, 2), (1, 3)])
    with pytest.raises(ValueError, match="32-bit"):
        pack([(0, 1 << 32)])


def _model_values(standard: str, preset: str) -> tuple[dict, dict, dict]:
    """(the model's values, the preset's params, {model name: (ours, model's)} where they differ)
    of a values-only file in hwmodel/standards/ (its `values` and `param_map`)."""
    from importlib import resources

    import yaml

    model = yaml.safe_load((resources.files("hwmodel") / "standards" / f"{standard}.yaml").read_text())
    params = load_hardware(preset).timing.params
    values = model["values"]
    differ = {t: (params[o], values[t]) for t, o in model["param_map"].items() if params[o] != values[t]}
    return values, params, differ


@pytest.mark.parametrize("preset", ["hbm2-pim", "fpga-proto"])
def test_hbm_pim_timing_is_the_vendor_simulators(preset):
    """hbm2-pim (and fpga-proto, its timing on a slow clock) take every DRAM timing value from
    the HBM2 device file of Samsung's own HBM-PIM simulator (hwmodel/standards/pimsimulator_hbm2.yaml)."""
    values, params, differ = _model_values("pimsimulator_hbm2", preset)
    assert differ == {}, f"{preset} differs from PIMSimulator's HBM2 device (ours, vendor's): {differ}"
    assert params["BL2"] == values["BL"] // 2
    assert params["CL_ACC"] == params["CL"] and params["CWL_GB"] == params["CWL"]  # GRF_B by RD, GRF_A by WR
    assert params["tGB"] == params["CWL"] + params["BL2"]


def test_hbm3_pim_timing_is_the_attacc_models():
    """hbm3-pim takes every DRAM timing value from the AttAcc artifact's HBM3-PIM device model
    (hwmodel/standards/attacc_hbm3.yaml); its MAC spacing is that model's no-power-constraint one."""
    values, params, differ = _model_values("attacc_hbm3", "hbm3-pim")
    assert differ == {}, f"hbm3-pim differs from AttAcc's HBM3-PIM model (ours, model's): {differ}"
    assert params["BL2"] == values["nBL"] and params["tMAC"] == 4  # HBM3_5.2Gbps_NPC's nCCDAB
    assert params["tGB"] == params["CWL"] + params["BL2"] and params["CWL_GB"] == params["CWL"]
