"""The real-tool adapters' parsers on outputs captured from pathload and pathChirp.

pathload and pathChirp are built by hand (docs/bwest.md) and absent from CI, so
the integration tests that run them skip there. These tests run everywhere: the
outputs in ``tests/data/bwest_tools/`` were written by the adapters themselves
during one ``swell run`` of ``capture.yaml`` with the real tools on PATH
(``README.md`` there: when, which versions), together with that study's
``results.json``. Each test reads a captured output through the adapter's pure
functions (:func:`~swell.generators.bwest_tools.pathload_estimate`,
:func:`~swell.generators.bwest_tools.pathchirp_estimates`) and checks what it
extracts against the numbers the tool printed and against what the run itself
recorded.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from swell.generators import bwest_tools as tools

DATA = Path(__file__).resolve().parents[1] / "data" / "bwest_tools"


def _text(name: str) -> str:
    return (DATA / name).read_text()


def _run(label: str) -> dict:
    runs = json.loads((DATA / "results.json").read_text())["runs"]
    (run,) = [r for r in runs if r["label"] == label]
    return run


def test_a_finished_pathload_measurement_gives_its_range() -> None:
    """pathload 1.3.2 on an idle 20 Mbit/s link: seven fleets, then its range."""
    text = _text("pathload_rcv-range.txt")
    assert tools.parse_pathload(text) == (19.83, 20.04)
    e = tools.pathload_estimate(text, False, 100.0, 109.6)
    assert e == {"t_start": 100.0, "t_end": 109.6, "low_mbps": 19.83, "high_mbps": 20.04,
                 "estimate_mbps": pytest.approx(19.935), "probe_bytes": None,
                 "timeout": False}
    # the same range the run recorded, after the time the tool says it took
    (done,) = _run("pathload")["foreground"]["estimates"]
    assert (done["low_mbps"], done["high_mbps"], done["timeout"]) == (19.83, 20.04, False)
    latency = float(re.search(r"Measurement latency is ([\d.]+) sec", text).group(1))
    assert done["t_end"] - done["t_start"] == pytest.approx(latency, abs=0.5)


def test_a_pathload_range_in_gbits_after_aborted_fleets() -> None:
    """pathload on loopback: interrupt coalescence detected, three fleets aborted for
    their losses, then a range of thousands of Mbit/s (not the open "greater than")."""
    text = _text("pathload_rcv-loopback.txt")
    assert "Interrupt coalescion detected" in text and "Aborting fleet" in text
    assert tools.parse_pathload(text) == (2850.52, 4683.0)
    e = tools.pathload_estimate(text, False, 0.0, 1.86)
    assert e is not None and e["estimate_mbps"] == pytest.approx(3766.76)


def test_a_pathload_measurement_killed_at_its_timeout_is_a_timeout() -> None:
    """Killed after 2 s (``timeout_s: 2``): its header only, no range, and a timeout."""
    text = _text("pathload_rcv-timeout.txt")
    assert "starts measurements" in text and "Fleet" not in text
    assert tools.parse_pathload(text) == (None, None)
    e = tools.pathload_estimate(text, True, 10.0, 12.0)
    assert e is not None and e["timeout"] is True
    assert (e["low_mbps"], e["high_mbps"], e["estimate_mbps"]) == (None, None, None)
    # a killed run is a timeout even if it printed a range before it was stopped
    killed = tools.pathload_estimate(_text("pathload_rcv-range.txt"), True, 10.0, 12.0)
    assert killed is not None and killed["timeout"] and killed["low_mbps"] is None
    fg = _run("pathload-2s")["foreground"]
    assert fg["estimates"] and all(e["timeout"] for e in fg["estimates"])
    assert fg["timeouts"] == len(fg["estimates"]) and fg["estimate_mbps"] == []
    assert all(1.9 <= e["t_end"] - e["t_start"] <= 3.0 for e in fg["estimates"])
    assert any("timed out" in p for p in fg["problems"]), fg["problems"]
    assert "no estimate finished in the measurement window" in fg["problems"]


@pytest.mark.parametrize("name", ["pathload_rcv-no-sender.txt",
                                  "pathload_rcv-cut-at-run-end.txt"])
def test_a_pathload_run_that_ended_without_a_range_gives_no_estimate(name: str) -> None:
    """``Unable to connect`` (the sender still busy with the killed measurement), and
    a measurement stopped by the end of the run: no range, no estimate, no timeout."""
    text = _text(name)
    assert "Available bandwidth" not in text and "Avail-bw" not in text
    assert tools.parse_pathload(text) == (None, None)
    assert tools.pathload_estimate(text, False, 0.0, 1.0) is None


def test_pathchirp_instbw_gives_one_estimate_per_line() -> None:
    """pathChirp 2.3.7's ``.instbw`` on the idle 20 Mbit/s link: ``time Mbit/s`` lines."""
    text = _text("pathchirp-idle20.instbw")
    lines = text.split("\n")
    pairs = tools.parse_instbw(text)
    assert len(pairs) == len([x for x in lines if x.strip()]) == 51
    assert pairs[0] == (1795575506.434542, 26.439394)
    assert pairs[-1] == (1795575517.378022, 35.919750)
    times = [t for t, _ in pairs]
    assert times == sorted(times) and times[-1] - times[0] < 15  # within the 14 s run
    assert all(20 <= v <= 55 for _, v in pairs)  # what this host's run read (README)
    run = _run("pathchirp")
    recorded = run["foreground"]["estimates"]
    started = recorded[0]["t_start"]
    assert run["timing"]["foreground_start"] <= started < pairs[0][0]
    mine = tools.pathchirp_estimates(text, started)
    assert [(e["t_end"], e["estimate_mbps"]) for e in mine] == pairs
    assert [(e["t_start"], e["t_end"], e["estimate_mbps"]) for e in mine] == \
        [(e["t_start"], e["t_end"], e["estimate_mbps"]) for e in recorded]
    # each estimate spans from the one before it
    assert all(b["t_start"] == a["t_end"] for a, b in zip(mine, mine[1:], strict=False))


def test_pathchirp_instbw_skips_what_is_not_a_time_and_a_rate() -> None:
    """A partly written last line or a stray word does not stop the parse."""
    text = _text("pathchirp-idle20.instbw")
    cut = text[: text.rindex("\n", 0, len(text) - 1) + 8]  # the last line cut mid-number
    assert cut.endswith("\n1795575") and len(tools.parse_instbw(cut)) == 50
    assert tools.parse_instbw("pathchirp\n" + text) == tools.parse_instbw(text)
    assert tools.pathchirp_estimates("", 5.0) == []
