"""Command-level CP-SAT (issue 16, item 2a): the issue cycle of every DRAM/PIM command of a
program, optimal over a stated space, checked by the simulator.

The model (solver/cmdlevel/model.py) takes a decoded program (channel streams + host stream)
and its simulated command log, expands every sweep into single commands (a MAC/RD/WR/WRGB
burst, an RDACC burst: one command on the bus each) and gives each an integer issue cycle.

Constraints, one module per family:

* commands.py - the expansion and the **fixed orders**: per bank, every command touching it
  (ACT, column commands, PRE, REF/REFSB) in emitted order; per (PIM unit, accumulator), its
  MACs and RDACC bursts in emitted order (fp32 sums in the same order: bit-true); per
  global-buffer burst, WRGB -> the MACs reading that content (>= tGB) -> the next WRGB of the
  burst; the link commands (RD, WR, WRGB, RDACC) in emitted order; the row commands (ACT, PRE,
  REF, REFSB) in emitted order; REF/REFSB and SIG/WAIT are barriers (nothing crosses them).
* order.py - the transitive closure of those orders.
* timing_rows.py - every row of hw.timing.constraints between every pair of commands of a
  channel, by scope (bank / bank group / rank / channel through the masks), window rows (tFAW)
  over the N-th most recent; one command per cycle on a channel's bus (AllDifferent); on a
  shared-bus device (organization.command_bus = shared_pair) the row commands of channels 2k and
  2k+1 do not overlap (an ACT holds the row bus tACT_BUS cycles), nor do their column commands
  (model.py).
* sync.py - SIG/WAIT across streams, the host stream (fixed op durations), the JEDEC refresh
  limits, and the makespan, all as equalities with the simulator's definitions.

**The search space**: any issue cycles satisfying all of that. Free are the orders the fixed
ones leave open: a bank set's PRE/ACT relative to the MAC bursts of other banks (row changes
hidden behind the other bank of a unit), WRGB bursts relative to MACs not reading their buffer
burst, MACs of different banks and accumulators relative to each other, RDACC bursts relative to
MACs into other accumulators, and all idle gaps. Fixed: each bank's command order (so the row
order, the bank holding each row and every column access stay as emitted), each accumulator's
MAC/RDACC order, the global-buffer data dependencies, the order of the link commands and of the
row commands, and the segments between SIG/WAIT points. Not in the space: another tiling,
layout, row-to-bank assignment or task order (the task-level model's decisions).

modulo.py states the steady state of a task's row/chunk loop (item 2b): one period of the
loop, read from the emitted program, as a periodic schedule with the same constraints among
consecutive iterations, and proves its least initiation interval; a real-size kernel, too large
for the whole-program model, inherits that proof for every iteration of its loop.

A proof (`OPTIMAL`) is a proof over that space for the whole program (every channel and the
host, with their synchronisation), with the makespan equal to the simulated one. emit.py
re-emits the schedule as stamped single-command streams, which sim.simulate must accept
(pimsat/command_level.py runs model, re-emission, simulation and the bit-true check).
"""

from .emit import restamp
from .model import CommandSchedule, solve

__all__ = ["solve", "restamp", "CommandSchedule"]
