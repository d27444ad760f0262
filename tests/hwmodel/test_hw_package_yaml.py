"""The package's own YAML files (isa.yaml, the family timing table) are read with libyaml's
parser when PyYAML has it: the same data as the pure-Python parser gives."""

from importlib import resources

import pytest
import yaml

from hwmodel.isa import _load
from hwmodel.loader import _TABLE_FILE, PRESET_DIR, family_timing_table


@pytest.mark.skipif(not getattr(yaml, "__with_libyaml__", False), reason="PyYAML without libyaml")
def test_libyaml_reads_the_package_files_as_pyyaml_does():
    for text in ((resources.files("hwmodel") / "isa.yaml").read_text(), (PRESET_DIR / _TABLE_FILE).read_text()):
        assert yaml.load(text, Loader=yaml.CSafeLoader) == yaml.safe_load(text)  # noqa: S506
    assert family_timing_table() == yaml.safe_load((PRESET_DIR / _TABLE_FILE).read_text())
    assert _load().ops  # the table built from it
