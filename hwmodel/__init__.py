"""hwmodel: the parametric PIM-DRAM hardware description, its timing table and its ISA."""

from .loader import HardwareError, load_hardware, preset_names
from .model import COMMANDS, PIM, REQUIRED_PARAMS, SCOPES, Hardware, Host, Organization, Timing, TimingConstraint

__all__ = [
    "COMMANDS",
    "REQUIRED_PARAMS",
    "SCOPES",
    "Hardware",
    "HardwareError",
    "Host",
    "Organization",
    "PIM",
    "Timing",
    "TimingConstraint",
    "load_hardware",
    "preset_names",
]
