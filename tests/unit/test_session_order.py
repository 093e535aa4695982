"""The session's steps: servers up before any client, a window as long as asked.

Two in-process generators record the calls the session makes (what the session
drives is the interface, not a tool; the real kinds run in the integration tests).
A foreground server that takes long to start must not shorten the measurement (a
netem run in a loaded QEMU guest lost most of its 3 s window to Apache's start-up);
a window that does end up short, because the machine could not keep the schedule,
is a problem of the run; a foreground that ends by itself is not short. No root.
"""

from __future__ import annotations

import time
from typing import Any

from swell.experiments.session import Session
from swell.generators.base import Generator, GenResult
from swell.progress import Progress


class Recorder(Generator):
    """Records each step with its time; optional delays in chosen steps."""

    native = ()

    def __init__(self, name: str, log: list[tuple[str, str, float]], delays: dict[str, float],
                 ends_after: float | None = None) -> None:
        super().__init__()
        self.name, self.log, self.delays, self.ends_after = name, log, delays, ends_after
        self.started: float | None = None

    def _step(self, step: str) -> None:
        self.log.append((self.name, step, time.monotonic()))
        time.sleep(self.delays.pop(step, 0.0))

    def start_server(self) -> None:
        self._step("start_server")

    def wait_ready(self, timeout: float = 10.0) -> None:
        self._step("wait_ready")

    def start_client(self) -> None:
        self._step("start_client")
        self.started = time.monotonic()

    def running(self) -> bool:
        return not (self.ends_after is not None and self.started is not None
                    and time.monotonic() - self.started > self.ends_after)

    def poll(self) -> list[dict[str, Any]]:
        self._step("poll")
        return []

    def stop(self) -> None:
        self._step("stop")

    def collect(self, warmup_s: float = 0.0) -> GenResult:
        return GenResult(self.name, {}, {}, {})


def run(bg_delays: dict[str, float], fg_delays: dict[str, float], warmup: float,
        total: float, ends_after: float | None = None
        ) -> tuple[Session, list[tuple[str, str, float]]]:
    log: list[tuple[str, str, float]] = []
    session = Session(Recorder("bg", log, bg_delays),
                      Recorder("fg", log, fg_delays, ends_after))
    with Progress("test", total=total) as prog:
        session.run(warmup, total, prog)
    return session, log


def test_servers_ready_before_any_client_and_slow_start_costs_no_window() -> None:
    session, log = run({}, {"start_server": 0.5, "wait_ready": 0.3}, 0.2, 0.6)
    steps = [(g, s) for g, s, _ in log if s != "poll"]
    assert steps[:5] == [("bg", "start_server"), ("fg", "start_server"),
                         ("bg", "wait_ready"), ("fg", "wait_ready"), ("bg", "start_client")]
    # the foreground stops first (at the window's end, then again with the rest: each
    # generator's stop is idempotent), the background last
    assert steps[5] == ("fg", "start_client") and steps[6] == ("fg", "stop")
    assert steps[-1] == ("bg", "stop") and ("bg", "stop") not in steps[:-1]
    t = session.timing
    assert 0.2 <= t["foreground_start"] - t["background_start"] < 0.3
    assert 0.38 <= t["end"] - t["foreground_start"] < 0.5
    assert session.problems == []


def test_a_window_cut_short_is_a_problem() -> None:
    # the machine stalls in the warm-up (a progress tick that took 0.5 s): the
    # foreground starts 0.3 s late and measures 0.1 of the asked 0.4 s
    session, _ = run({"poll": 0.5}, {}, 0.2, 0.6)
    (problem,) = session.problems
    assert problem.startswith("measurement window 0.1") and "of the asked 0.40 s" in problem


def test_a_foreground_that_ends_by_itself_is_not_short() -> None:
    session, log = run({}, {}, 0.1, 2.0, ends_after=0.2)
    assert session.timing["end"] - session.timing["foreground_start"] < 0.6
    assert session.problems == []
    assert [s for g, s, _ in log if g == "fg"][-1] == "stop"
