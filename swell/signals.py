"""Whether a process catches a signal yet: its ``SigCgt`` mask in ``/proc``.

Tools that print their counters when interrupted (httperf, ab) install their
SIGINT handler a few milliseconds after they start (on this host 3-10 ms; in a
QEMU guest under TCG ten to fifty times that). A SIGINT that arrives before
kills them with the default action and loses everything they would have
printed, so whoever stops them by SIGINT first waits, boundedly, until the
handler is in place. Linux only (the mask is ``/proc/PID/status``'s
``SigCgt``, a hexadecimal bit set, bit ``signum - 1``).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

POLL_S = 0.005
# at most, for a tool's SIGINT handler before it is sent SIGINT anyway
HANDLER_WAIT_S = 10.0


def catches(pid: int, signum: int) -> bool | None:
    """True if ``pid`` has a handler for ``signum``; None if it is gone or unreadable."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return None


def wait_catching(proc: subprocess.Popen, signum: int, timeout: float) -> bool:
    """Wait until the running ``proc`` catches ``signum`` (True), has exited or has
    not within ``timeout`` seconds (False)."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        if catches(proc.pid, signum):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
    return False
