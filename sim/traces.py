"""Trace exporters of the simulator: command log (CSV), Chrome/Perfetto trace (JSON), VCD waveform.

This module is a facade: the exporters live in

* :mod:`sim.trace_common` -- input dtypes (:data:`COMMAND_LOG_DTYPE`, :data:`HOST_EVENT_DTYPE`),
  :func:`command_log`, :func:`host_events`, validation, atomic writes, formatting and bank
  expansion helpers, :func:`summarise`; its docstring describes the inputs;
* :mod:`sim.trace_csv` -- :func:`write_command_log`;
* :mod:`sim.trace_chrome` -- :func:`write_chrome_trace`, :func:`slice_cycles`;
* :mod:`sim.trace_vcd` -- :func:`write_vcd`, :func:`vcd_timescale`;

and every name is re-exported here, so ``from sim.traces import ...`` keeps working.

Outputs
-------
* :func:`write_command_log` -- CSV ``cycle,command,channel,rank,bankgroup,bank,row,column``, one
  line per bank (multi-bank commands expanded), sorted by (cycle, channel). Vectorised.
* :func:`write_chrome_trace` -- Chrome trace-event JSON (Perfetto, chrome://tracing).
  **1 us in the viewer = 1 memory-clock cycle** (``ts`` = cycle, exact integers).
* :func:`write_vcd` -- VCD waveform (GTKWave). **1 cycle = 1 timescale unit.**
* :func:`summarise` -- command counts per command and per channel.

Every writer is atomic: it writes a temporary file beside the target and renames it over the
target only when complete; on any error the temporary file is removed and an existing target is
left untouched.
"""

from __future__ import annotations

from .trace_chrome import (
    _TID_STRIDE,
    DEFAULT_MAX_EVENTS,
    _clip_to_next,
    _pid_channel,
    slice_cycles,
    write_chrome_trace,
)
from .trace_common import (
    _ACT,
    _CHUNK,
    _CMD,
    _MAC,
    _PRE,
    _REF,
    COMMAND_LOG_DTYPE,
    HOST_EVENT_DTYPE,
    _atomic_open,
    _check_host,
    _check_log,
    _Dec,
    _expand,
    _format_rows,
    _Hex,
    _line_counts,
    _Lut,
    _order_by,
    _popcount,
    _unit_masks,
    command_log,
    host_events,
    summarise,
)
from .trace_csv import CSV_HEADER, write_command_log
from .trace_vcd import _IDLE, _VCD_UNITS, vcd_timescale, write_vcd

__all__ = [
    "COMMAND_LOG_DTYPE",
    "HOST_EVENT_DTYPE",
    "command_log",
    "host_events",
    "slice_cycles",
    "summarise",
    "write_chrome_trace",
    "write_command_log",
    "write_vcd",
]
