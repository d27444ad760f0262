import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from simgen import LOCKSTEP  # noqa: E402

from hwmodel import load_hardware  # noqa: E402


@pytest.fixture(scope="session")
def hbm2():
    return load_hardware("hbm2-pim", ["organization.channels=2", LOCKSTEP])


@pytest.fixture(scope="session")
def fpga():
    return load_hardware("fpga-proto")
