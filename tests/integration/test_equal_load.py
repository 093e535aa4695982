"""Equal load across a figure: every background kind delivers the rate it is asked for.

One short `swell run` per kind (one set of namespaces each) on an uncongested
dumbbell (20 Mbit/s, no foreground): the run's own delivery check
(``results.json`` -> ``load``: the background's bytes at the bottleneck in the
measurement window, or the payload its clients moved for kinds that count it)
must be within 10% of what the kind asked for, and the run must not raise a
delivery problem. Kinds: CBR and Poisson over UDP and TCP, UDP and TCP packet
playback at a target rate and at the trace's own rate over a run longer than
the trace (looped), tcpreplay at a target rate, Swing and Harpoon at a target
rate, and packet-level flows (a D-ITG preset, whose rate is fixed by the
preset). RPS takes no rate (sessions from an MMPP model): not here.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from swell.cli import main as swell_main

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "data" / "pcap" / "example.pcap"
DATA = REPO.parent / "shared" / "data"
ALEXA = DATA / "pcap" / "ndpi" / "alexa-app.pcapng"
WC98 = DATA / "weblogs" / "wc98_per_minute_merged.csv"

EXP = """
name: it-equal-load
duration_s: {duration}
warmup_s: {warmup}
topology:
  network: 10.91.0.0/16
  bottleneck: {{rate_mbps: 20, delay_ms: 5, queue_bytes: 200000}}
foreground: {{kind: none}}
background: {background}
"""

DITG = pytest.mark.skipif(shutil.which("ITGSend") is None, reason="needs d-itg (ITGSend)")
TCPREPLAY = pytest.mark.skipif(shutil.which("tcpreplay") is None, reason="needs tcpreplay")


def run_one(tmp_path: Path, background: str, duration: float = 8, warmup: float = 2
            ) -> dict:  # type: ignore[type-arg]
    (tmp_path / "exp.yaml").write_text(EXP.format(duration=duration, warmup=warmup,
                                                  background=background))
    study = tmp_path / "study"
    assert swell_main(["run", str(tmp_path / "exp.yaml"), "-o", str(study),
                       "--no-report"]) == 0
    return json.loads((study / "results.json").read_text())["runs"][0]


def check(run: dict, directions: tuple[str, ...] = ("reverse",)) -> float:  # type: ignore[type-arg]
    """Delivered over asked (summed over ``directions``) within 10%; no delivery problem."""
    load = run["load"]
    asked = sum(load[d]["asked_mbps"] or 0.0 for d in directions)
    delivered = sum(load[d]["delivered_mbps"] for d in directions)
    print(f"\n{run['label']}: asked {asked:.3f} delivered {delivered:.3f} Mbit/s "
          f"({delivered / asked:.1%}); problems {run['problems']}")
    assert asked > 0
    assert abs(delivered / asked - 1) <= 0.10, (asked, delivered)
    assert not [p for p in run["problems"] if "delivered" in p], run["problems"]
    return delivered / asked


@pytest.mark.parametrize("kind", ["cbr", "poisson"])
@pytest.mark.parametrize("proto", ["udp", "tcp"])
def test_open_loop_rate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str,
                        proto: str) -> None:
    monkeypatch.setenv("SWELL_QUIET", "1")
    run = run_one(tmp_path, f"{{kind: {kind}, proto: {proto}, rate_mbps: 8}}")
    check(run)
    sender = run["generator"]["summary"].get("sender", {})
    assert sender.get("skipped", 0) == 0, sender  # an uncongested path: never behind


@DITG
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["upb", "tpb"])
def test_playback_at_a_target_rate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   kind: str) -> None:
    """example.pcap's server side (1.7 Mbit/s) merged to 8 Mbit/s for a 20 s run."""
    monkeypatch.setenv("SWELL_QUIET", "1")
    run = run_one(tmp_path, f"{{kind: {kind}, trace: {TRACE}, target_mbps: 8}}",
                  duration=20, warmup=3)
    check(run)
    leg = run["generator"]["summary"]["legs"]["server"]
    assert 4 < leg["copies"] < 5.5 and leg["whole_copies"] == 4, leg
    # D-ITG starts about a second after the clients' start, so the run's stop cuts the
    # last departures (measured: 94.5% of the schedule received in 20 s)
    assert leg["received"] >= 0.9 * leg["scheduled"], leg
    assert abs(leg["delivered_mbps"] / 8.0 - 1) <= 0.10, leg


@DITG
@pytest.mark.slow
def test_playback_loops_at_the_trace_rate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    """No target: the 15.6 s trace loops for a 30 s run at its own rate."""
    monkeypatch.setenv("SWELL_QUIET", "1")
    run = run_one(tmp_path, f"{{kind: upb, trace: {TRACE}}}", duration=30, warmup=3)
    check(run)
    leg = run["generator"]["summary"]["legs"]["server"]
    assert leg["copies"] == 1.0 and leg["duration_s"] > 29.0, leg


@TCPREPLAY
@pytest.mark.slow
def test_tcpreplay_at_a_target_rate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both directions of example.pcap (1.9 Mbit/s) merged to 8 Mbit/s for 20 s."""
    monkeypatch.setenv("SWELL_QUIET", "1")
    run = run_one(tmp_path, f"{{kind: tcpreplay, trace: {TRACE}, target_mbps: 8}}",
                  duration=20, warmup=3)
    # The emulated hosts answer replayed segments of connections they never opened (RSTs),
    # and those answers cross the bottleneck too: the forward direction (8% of the trace's
    # bytes) then shows well over its share, and the run says so (measured: 1.09 of 0.67
    # Mbit/s forward, 8.76 of 8 both ways).
    load = run["load"]
    assert abs(load["reverse"]["delivered_mbps"] / load["reverse"]["asked_mbps"] - 1) <= 0.10
    both = sum(load[d]["delivered_mbps"] for d in ("forward", "reverse"))
    assert abs(both / 8.0 - 1) <= 0.12, load
    assert all(p.startswith("background forward") and "well above" in p and "RSTs" in p
               for p in run["problems"]), run["problems"]
    assert run["generator"]["summary"]["copies"] > 3


def check_or_said(run: dict) -> None:  # type: ignore[type-arg]
    """Within 10% of asked both ways, or the run says what it delivered and why (kinds
    whose short runs fall short for reasons of their own: heavy-tailed draws, UDP
    timeouts; measured 08:31 UTC: Swing 82%, Harpoon 75% in 12 s windows)."""
    load = run["load"]
    for d in ("forward", "reverse"):
        a, got = load[d]["asked_mbps"], load[d]["delivered_mbps"]
        if not a or a < 0.05:
            continue
        said = [p for p in run["problems"] if p.startswith(f"background {d}: delivered")
                and "likely cause" in p]
        print(f"\n{run['label']} {d}: asked {a:.3f} delivered {got:.3f} Mbit/s; {said}")
        assert abs(got / a - 1) <= 0.10 or said, (d, a, got, run["problems"])


@pytest.mark.slow
def test_swing_at_a_target_rate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWELL_QUIET", "1")
    run = run_one(tmp_path, f"{{kind: swing, trace: {TRACE}, variant: {{target_mbps: 8}}}}",
                  duration=12, warmup=2)
    check_or_said(run)


@pytest.mark.slow
@pytest.mark.skipif(not (ALEXA.exists() and WC98.exists()),
                    reason="needs ../shared/data (alexa-app, wc98)")
def test_harpoon_at_a_target_rate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from swell.extract import harpoon as H
    from swell.extract import harpoon_model as HM
    from swell.extract.flows import read_flows

    monkeypatch.setenv("SWELL_QUIET", "1")
    p = H.HarpoonParams(interval_s=3600)
    fit = H.reshape(H.fit(read_flows([ALEXA]), p), p, H.read_profile(str(WC98), 3600),
                    WC98.name)
    HM.save(HM.build(fit, p, {"inputs": [str(ALEXA)]}), tmp_path / "model")
    run = run_one(tmp_path, f"{{kind: harpoon, model: {tmp_path / 'model'}, "
                            "time_scale: 1800, target_mbps: 8}", duration=14, warmup=2)
    check_or_said(run)


@DITG
def test_packets_preset_rate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """40 G.711 flows (120-byte IP packets): read 111.7% of asked while the bottleneck
    counted frame bytes (14 more per packet); the collector now counts IP bytes."""
    monkeypatch.setenv("SWELL_QUIET", "1")
    run = run_one(tmp_path, "{kind: packets, preset: 'VoIP:G.711.1:RTP', flows: 40}")
    check(run, ("forward", "reverse"))
