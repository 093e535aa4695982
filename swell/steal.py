"""CPU time the hypervisor took from this machine (steal), as the kernel counts it.

On a virtual machine the host's scheduler can hold a vCPU for milliseconds
while the guest's clocks run on; every timestamp taken around that moment then
carries the hold as a delay that no queue caused. The guest's kernel counts
that time per CPU (the eighth value of ``/proc/stat``'s ``cpu`` lines, in
clock ticks of ``SC_CLK_TCK``, usually 10 ms). Timing-sensitive measurements
read the counter around each measurement and treat a rise as a disturbance
(pathload discards a stream during which its sender was context-switched for
the same reason). Coarse: a hold shorter than a tick shows only when it
crosses a tick boundary, so no rise does not prove no hold.
"""

from __future__ import annotations

import os

_TICK_NS = 1e9 / os.sysconf("SC_CLK_TCK")


def steal_ns(stat: str = "/proc/stat") -> float:
    """The machine's steal time so far, summed over its CPUs (ns); 0 when the
    kernel does not say (no /proc, or a kernel without the field)."""
    try:
        with open(stat) as f:
            first = f.readline().split()
    except OSError:
        return 0.0
    if len(first) < 9 or first[0] != "cpu":
        return 0.0
    return float(first[8]) * _TICK_NS
