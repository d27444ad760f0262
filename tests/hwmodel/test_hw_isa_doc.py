"""docs/isa.md is generated from the tables and must not go stale."""

from pathlib import Path

from hwmodel.isa import ISA
from hwmodel.isa_doc import REGENERATE, generate, write

DOC = Path(__file__).resolve().parents[2] / "docs" / "isa.md"


def test_docs_not_stale():
    assert DOC.exists(), f"{DOC} is missing; generate it with: {REGENERATE}"
    assert DOC.read_text() == generate(), f"{DOC} is stale; regenerate it with: {REGENERATE}"


def test_generated_content(tmp_path):
    text = generate()
    assert f"ISA version **{ISA.version}**" in text
    for o in ISA.ops:
        assert f"### {o.mnemonic}\n" in text
    assert "| `offset` | [91:52] | 40 |  |" in text  # RD.offset straddles the 64-bit boundary
    assert "| reserved | [127:82] | 46 | zero |" in text  # MAC padding
    assert "| ACT | ACT | rank | `tFAW` | 4 |" in text
    assert "| `organization.channels` |" in text and "hbm3-pim" in text
    write(tmp_path / "isa.md")
    assert (tmp_path / "isa.md").read_text() == text
