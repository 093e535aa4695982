"""A compressed day of Harpoon through `swell run` (root; Harpoon's own validation).

Model: the alexa-app capture's flows (file sizes, inter-connection times, 16
servers' weights) with the per-hour byte targets of one real day (WorldCup98's
per-minute log, 1 May 1998), 24 intervals of 3600 s run at time_scale 1800:
2 s per hour, 48 s for the day, at 6 Mbit/s mean. Checks: each interval's TCP
bytes seen at the bottleneck (server -> client payload, by the interval the
packet crossed in) within 10% of the model's target; the servers' connection
counts in the capture rank like the pool's weights (Spearman > 0.9); every
connection completed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import dpkt
import numpy as np
import pytest
from scipy.stats import spearmanr

from swell.cli import main as swell_main
from swell.extract import harpoon as H
from swell.extract import harpoon_model as HM
from swell.extract.flows import read_flows

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
ALEXA = DATA / "pcap" / "ndpi" / "alexa-app.pcapng"
WC98 = DATA / "weblogs" / "wc98_per_minute_merged.csv"

EXP = """
name: it-harpoon
duration_s: 48
warmup_s: 0
topology:
  network: 10.83.0.0/16
  bottleneck: {rate_mbps: 100, delay_ms: 2, queue_bytes: 500000}
foreground: {kind: none}
background: {kind: harpoon, model: model, time_scale: 1800, target_mbps: 6}
"""

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not (ALEXA.exists() and WC98.exists()), reason="needs ../shared/data (alexa-app, wc98)")]


def _payload(path: Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(times, TCP payload bytes, destination address) of every packet of a capture."""
    ts, size, dst = [], [], []
    with open(path, "rb") as fh:
        for t, buf in dpkt.pcap.Reader(fh):
            ip = dpkt.ethernet.Ethernet(buf).data
            if not isinstance(ip, dpkt.ip.IP) or not isinstance(ip.data, dpkt.tcp.TCP):
                continue
            tcp = ip.data
            ts.append(t)
            size.append(ip.len - 4 * ip.hl - 4 * (tcp.off))
            dst.append(".".join(str(b) for b in ip.dst) if tcp.flags & dpkt.tcp.TH_SYN
                       and not tcp.flags & dpkt.tcp.TH_ACK else "")
    return np.array(ts), np.array(size, dtype=float), dst


def test_compressed_day(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    if shutil.which("tcpdump") is None:
        pytest.skip("tcpdump missing (apt-get install tcpdump)")
    monkeypatch.setenv("SWELL_QUIET", "1")
    p = H.HarpoonParams(interval_s=3600)
    fit = H.reshape(H.fit(read_flows([ALEXA]), p), p, H.read_profile(str(WC98), 3600),
                    WC98.name)
    HM.save(HM.build(fit, p, {"inputs": [str(ALEXA)]}), tmp_path / "model")
    (tmp_path / "exp.yaml").write_text(EXP)
    study = tmp_path / "study"
    assert swell_main(["run", str(tmp_path / "exp.yaml"), "-o", str(study)]) == 0
    run = json.loads((study / "results.json").read_text())["runs"][0]
    conns = run["load"]["connections"]
    assert conns["failed"] == 0 and conns["cut"] <= 0.01 * conns["started"], conns
    rdir = next(study.glob("runs/*/rep0"))
    sched_head = json.loads((rdir / "background" / "schedule.jsonl").open().readline())
    meta = sched_head["meta"]
    targets = np.array([iv["target_bytes"] for iv in meta["intervals"]])
    length = meta["interval_s"]
    # the run's clock: the first SYN in the forward capture is the first connection's start
    records = [json.loads(ln) for ln in (rdir / "background" / "records.jsonl").open()]
    t_first = min(r["start"] for r in records)
    fwd_t, _, fwd_dst = _payload(rdir / "capture" / "bottleneck-forward.pcap")
    syn_t = np.array([t for t, d in zip(fwd_t, fwd_dst, strict=True) if d])
    base = syn_t.min() - t_first
    rev_t, rev_b, _ = _payload(rdir / "capture" / "bottleneck-reverse.pcap")
    got = np.histogram(rev_t - base, bins=np.arange(len(targets) + 1) * length,
                       weights=rev_b)[0]
    ratio = got / targets
    assert np.all(np.abs(ratio - 1) < 0.10), np.round(ratio, 3).tolist()
    # the day's shape is there: the busiest hour carries more than the quietest
    assert got.max() > 1.3 * got.min()
    # server pool: connections per server address in the capture rank like the weights
    counts = [sum(1 for d in fwd_dst if d == a) for a in meta["servers"]]
    rho = spearmanr(counts, meta["server_weights"]).statistic
    assert rho > 0.9, (counts, meta["server_weights"])
