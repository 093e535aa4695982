"""A chirp estimator that cannot finish in its time is a timeout, not a crash.

Runs the real ``swell-probe`` sender and receiver on the loopback interface (no
root, no namespaces) under :class:`~swell.generators.bwest.ProbeGenerator`, with
a ``timeout_s`` (50 ms) far shorter than the ``smooth`` (11) chirps one
estimate needs at 5 chirps a second: every record is then a timeout. The judge
(:func:`~swell.generators.bwest_report.judge`) lists them among the run's
problems. The integration suite has the SLoPS counterpart on an emulated link
(``test_a_search_that_cannot_converge_is_a_timeout``).
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

from swell.generators.bwest import ChirpLoop, ChirpSpec, ProbeGenerator
from swell.generators.bwest_report import judge
from swell.generators.kind import Window
from swell.placement import Endpoint, Local


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_chirp_loop_that_cannot_finish_in_time_is_a_timeout(tmp_path: Path) -> None:
    spec = ChirpSpec(kind="chirp", timeout_s=0.05, smooth=11, chirps_per_s=5)
    loop = ChirpLoop(spec, 10e6, 100e6, seed=1)
    here = Local()
    gen = ProbeGenerator("chirp", loop, Endpoint("127.0.0.1", here, "s"),
                         Endpoint("127.0.0.1", here, "c"), _free_udp_port(), 0.3,
                         tmp_path / "foreground")
    gen.check()
    t0 = time.time()
    try:
        gen.start_server()
        gen.wait_ready(10)
        gen.start_client()
        threading.Event().wait(1.5)
        assert gen.running()  # the loop goes on after its timeouts
    finally:
        gen.stop()
    t1 = time.time()
    result = gen.collect()
    estimates = result.summary["estimates"]
    assert loop.chirps, "no chirp was sent"
    assert estimates, "no timeout was recorded"
    assert all(e["timeout"] for e in estimates), estimates
    assert all(e["estimate_mbps"] is None and e["low_mbps"] is None for e in estimates)
    assert all(t0 <= e["t_start"] <= e["t_end"] <= t1 for e in estimates), estimates
    assert (tmp_path / "foreground" / "chirps.jsonl").is_file()
    metrics, problems = judge(result, Window(t0, t1, t0), 100.0)
    assert metrics["timeouts"] == len(estimates) and metrics["estimate_mbps"] == []
    assert metrics["time_to_first_s"] is None
    assert sum("timed out" in p for p in problems) == len(estimates), problems
    assert "no estimate finished in the measurement window" in problems
