"""Progress display for long work, on stderr.

On a terminal it redraws one line (``\\r``); elsewhere (CI, pipes) it prints a
line at most every few seconds so logs stay readable. ``SWELL_QUIET=1`` turns
it off.
"""

from __future__ import annotations

import os
import sys
import time
from types import TracebackType


class Progress:
    """A counter towards an optional total, with a rate and free-form status."""

    def __init__(self, label: str, total: float | None = None, unit: str = "") -> None:
        self.label = label
        self.total = total
        self.unit = unit
        self.done = 0.0
        self.status = ""
        self._t0 = time.monotonic()
        self._last = 0.0
        self._tty = sys.stderr.isatty()
        self._quiet = os.environ.get("SWELL_QUIET") == "1"
        self._interval = 0.2 if self._tty else 5.0

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.finish()

    def update(self, done: float | None = None, advance: float = 0.0, status: str = "") -> None:
        if done is not None:
            self.done = done
        self.done += advance
        if status:
            self.status = status
        now = time.monotonic()
        if now - self._last >= self._interval:
            self._last = now
            self._draw(final=False)

    def _line(self) -> str:
        elapsed = time.monotonic() - self._t0
        rate = self.done / elapsed if elapsed > 0 else 0.0
        if self.total:
            frac = min(1.0, self.done / self.total)
            bar = "#" * int(frac * 20)
            head = f"{self.label} [{bar:<20}] {100 * frac:5.1f}%"
        else:
            head = f"{self.label} {self.done:,.0f}{self.unit}"
        if self.unit == "B":  # byte counts read better in MB
            tail = f" {rate / 1e6:,.1f} MB/s {elapsed:5.1f}s"
            if not self.total:
                head = f"{self.label} {self.done / 1e6:,.1f} MB"
        else:
            tail = f" {rate:,.0f}{self.unit}/s {elapsed:5.1f}s"
        return head + tail + (f" {self.status}" if self.status else "")

    def _draw(self, final: bool) -> None:
        if self._quiet:
            return
        line = self._line()
        if self._tty:
            end = "\n" if final else ""
            sys.stderr.write("\r\x1b[K" + line + end)
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def note(self, text: str) -> None:
        """A message on its own line (warnings: shown even when progress is quiet)."""
        if self._tty and not self._quiet:
            sys.stderr.write("\r\x1b[K")
        sys.stderr.write(f"{self.label}: {text}\n")
        sys.stderr.flush()

    def finish(self) -> None:
        self._draw(final=True)
