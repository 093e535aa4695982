"""Connection reconstruction on real captures against tshark as the independent reference.

* Handshake legs: SYN -> SYN/ACK and SYN/ACK -> client ACK from tshark's frame
  times per TCP stream; tolerance 2 us (the captures have microsecond stamps).
* Per-connection frames and bytes per direction against ``tshark -q -z conv,tcp``:
  frames exact; bytes exact up to tshark's display unit (it prints "468 kB",
  truncated).
* Retransmissions: tshark frames flagged ``tcp.analysis.retransmission`` or
  ``tcp.analysis.out_of_order`` that carry payload (tshark also flags repeated
  SYN/ACKs and FINs, which are not data segments), minus capture duplicates found
  by IP id (see ``_retx_ref``); tolerance
  ``max(5, 20%)`` per file (tshark also calls a segment whose FIN was seen
  before a retransmission, where swell counts only sequence space already seen).
"""

from __future__ import annotations

import re
import subprocess
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from swell.extract.connections import ConnTable, build_connections
from swell.extract.reader import open_trace
from tests.conftest import DATA, have_tool

pytestmark = pytest.mark.skipif(not have_tool("tshark"), reason="tshark not installed")
BUNDLED = DATA / "pcap"


def _tshark(path: Path, *args: str) -> str:
    r = subprocess.run(
        ["tshark", "-n", "-r", str(path), *args], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def _table(path: Path) -> ConnTable:
    with open_trace(path) as tr:
        return build_connections(tr.chunks())


def _ep(t: ConnTable, i: int) -> tuple[str, int, str, int]:
    c = t.cols
    return (
        t.hosts[c["client"][i]],
        int(c["cport"][i]),
        t.hosts[c["server"][i]],
        int(c["sport"][i]),
    )


def _shared(shared_data: Path, rel: str) -> Path:
    p = shared_data / "pcap" / rel
    if not p.exists():
        pytest.skip(f"{p} not present")
    return p


def _tshark_legs(path: Path) -> dict[tuple, tuple[float, float]]:
    out = _tshark(
        path,
        "-Y",
        "tcp.flags.syn==1 || (tcp.flags.ack==1 && tcp.len==0)",
        "-T",
        "fields",
        "-e",
        "tcp.stream",
        "-e",
        "frame.time_epoch",
        "-e",
        "ip.src",
        "-e",
        "ipv6.src",
        "-e",
        "tcp.srcport",
        "-e",
        "ip.dst",
        "-e",
        "ipv6.dst",
        "-e",
        "tcp.dstport",
        "-e",
        "tcp.flags.syn",
        "-e",
        "tcp.flags.ack",
    )
    per: dict[str, dict] = defaultdict(dict)
    for line in out.splitlines():
        st, t, s4, s6, sp, d4, d6, dp, syn, ack = line.split("\t")
        s, d, tt = s4 or s6, d4 or d6, float(t)
        e = per[st]
        if syn == "1" and ack == "0" and "syn" not in e:
            e["syn"], e["key"] = tt, (s, int(sp), d, int(dp))
        elif syn == "1" and ack == "1" and "sa" not in e and "syn" in e:
            e["sa"] = tt
        elif syn == "0" and "sa" in e and "ack" not in e and (s, int(sp)) == e["key"][:2]:
            e["ack"] = tt
    legs = {}
    for e in per.values():
        if "ack" in e:
            legs.setdefault(e["key"], []).append((e["sa"] - e["syn"], e["ack"] - e["sa"]))
    return {k: v[0] for k, v in legs.items() if len(v) == 1}


@pytest.mark.parametrize("name", ["example.pcap", "example2.pcap", "sll.pcap"])
def test_handshake_legs(name: str) -> None:
    path = BUNDLED / name
    ref = _tshark_legs(path)
    t = _table(path)
    ours: dict[tuple, list] = defaultdict(list)
    for i in range(len(t)):
        ours[_ep(t, i)].append((t.cols["server_leg"][i], t.cols["client_leg"][i]))
    assert ref, "reference found no handshakes"
    checked = 0
    for key, (sl, cl) in ref.items():
        assert key in ours, f"{key} missing"
        if len(ours[key]) != 1:
            continue
        osl, ocl = ours[key][0]
        assert abs(osl - sl) < 2e-6 and abs(ocl - cl) < 2e-6, (key, osl, sl, ocl, cl)
        checked += 1
    assert checked >= 0.9 * len(ref)


_UNIT = {"bytes": 1, "kB": 1000, "MB": 1000**2, "GB": 1000**3}


def _conv(path: Path) -> dict[tuple, tuple[int, int, int, int, int, int]]:
    rows = {}
    pat = re.compile(
        r"^(\S+):(\d+)\s+<->\s+(\S+):(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\d+)\s+"
        r"(\d+)\s+(\S+)"
    )
    for line in _tshark(path, "-q", "-z", "conv,tcp").splitlines():
        m = pat.match(line.strip())
        if not m:
            continue
        a, ap, b, bp = m.group(1), int(m.group(2)), m.group(3), int(m.group(4))
        f_ba, by_ba, u1 = int(m.group(5)), int(m.group(6)), _UNIT[m.group(7)]
        f_ab, by_ab, u2 = int(m.group(8)), int(m.group(9)), _UNIT[m.group(10)]
        rows[(a, ap, b, bp)] = (f_ab, by_ab * u2, f_ba, by_ba * u1, u2, u1)
    return rows


@pytest.mark.parametrize("name", ["example.pcap", "tls2.pcap", "http-packets.pcap"])
def test_conversation_counts(name: str) -> None:
    path = BUNDLED / name
    ref = _conv(path)
    t = _table(path)
    c = t.cols
    ours: dict[tuple, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for i in np.flatnonzero(c["proto"] == 6):
        cl, cp, sv, sp = _ep(t, int(i))
        ours[(cl, cp, sv, sp)][0] += int(c["pkts_c2s"][i])
        ours[(cl, cp, sv, sp)][1] += int(c["wire_c2s"][i])
        ours[(cl, cp, sv, sp)][2] += int(c["pkts_s2c"][i])
        ours[(cl, cp, sv, sp)][3] += int(c["wire_s2c"][i])
    assert len(ref) == len(ours) > 0
    for (a, ap, b, bp), (f_ab, by_ab, f_ba, by_ba, u_ab, u_ba) in ref.items():
        if (a, ap, b, bp) in ours:
            fc, bc, fs, bs = ours[(a, ap, b, bp)]
        else:
            fs, bs, fc, bc = ours[(b, bp, a, ap)]
        assert (fc, fs) == (f_ab, f_ba), (a, ap, b, bp)
        # tshark prints bytes truncated to its unit ("468 kB" for 468,981 bytes)
        assert 0 <= bc - by_ab < u_ab and 0 <= bs - by_ba < u_ba, (a, ap, b, bp, bc, by_ab)


def _retx_ref(path: Path) -> int:
    """tshark's retransmitted or out-of-order data frames, minus capture duplicates.

    A duplicate (one packet recorded twice, e.g. by two taps) is a data frame equal to the
    previous data frame of its stream and direction in IP id (IPv4), sequence number and
    length, within 200 us; tshark calls it a retransmission, swell does not.
    """
    out = _tshark(
        path,
        "-Y",
        "tcp.len>0",
        "-T",
        "fields",
        "-e",
        "frame.number",
        "-e",
        "frame.time_epoch",
        "-e",
        "tcp.stream",
        "-e",
        "tcp.srcport",
        "-e",
        "ip.id",
        "-e",
        "tcp.seq_raw",
        "-e",
        "tcp.len",
        "-e",
        "tcp.analysis.retransmission",
        "-e",
        "tcp.analysis.out_of_order",
    )
    last: dict[tuple, tuple] = {}
    count = 0
    for line in out.splitlines():
        _, t, stream, sport, ipid, seq, ln, retx, ooo = line.split("\t")
        key, now = (stream, sport), (float(t), ipid, seq, ln)
        prev = last.get(key)
        last[key] = now
        dup = prev is not None and prev[1:] == now[1:] and now[0] - prev[0] <= 200e-6
        count += bool(retx or ooo) and not dup
    return count


@pytest.mark.parametrize("name", ["example.pcap", "example2.pcap", "tls2.pcap", "netml_demo.pcap"])
def test_retransmissions_bundled(name: str) -> None:
    path = BUNDLED / name
    t = _table(path)
    ours = int((t.cols["retx_c2s"] + t.cols["retx_s2c"]).sum())
    ref = _retx_ref(path)
    assert abs(ours - ref) <= max(5, 0.2 * ref), (ours, ref)


@pytest.mark.parametrize("rel", ["ndpi/alexa-app.pcapng", "ndpi/1kxun.pcap", "ndpi/tumblr.pcap"])
def test_retransmissions_shared(rel: str, shared_data: Path) -> None:
    path = _shared(shared_data, rel)
    t = _table(path)
    ours = int((t.cols["retx_c2s"] + t.cols["retx_s2c"]).sum())
    ref = _retx_ref(path)
    assert abs(ours - ref) <= max(5, 0.2 * ref), (ours, ref)


def test_handshake_legs_pcapng(shared_data: Path) -> None:
    path = _shared(shared_data, "ndpi/alexa-app.pcapng")
    ref = _tshark_legs(path)
    t = _table(path)
    got = {_ep(t, i): (t.cols["server_leg"][i], t.cols["client_leg"][i]) for i in range(len(t))}
    assert len(ref) > 50
    for key, (sl, cl) in ref.items():
        osl, ocl = got[key]
        assert abs(osl - sl) < 2e-6 and abs(ocl - cl) < 2e-6, key


@pytest.mark.parametrize("name", ["example.pcap", "example2.pcap"])
def test_http_requests_are_pairs(name: str) -> None:
    """a-b-t pairs: tshark's HTTP requests per connection equal our request/response pairs
    (HTTP/1.1 without pipelining: one request, one response); at least 95% must agree."""
    path = BUNDLED / name
    out = _tshark(
        path,
        "-Y",
        "http.request",
        "-T",
        "fields",
        "-e",
        "ip.src",
        "-e",
        "tcp.srcport",
        "-e",
        "ip.dst",
        "-e",
        "tcp.dstport",
    )
    ref: dict[tuple, int] = defaultdict(int)
    for line in out.splitlines():
        s, sp, d, dp = line.split("\t")
        if s and sp:  # IPv4 only (ip.src is empty for IPv6)
            ref[(s, int(sp), d, int(dp))] += 1
    t = _table(path)
    got = defaultdict(list)
    for i in range(len(t)):
        got[_ep(t, i)].append(int(t.cols["num_pairs"][i]))
    keys = [k for k in ref if len(got.get(k, [])) == 1]
    assert len(keys) >= 20
    agree = sum(got[k][0] == ref[k] for k in keys)
    assert agree >= 0.95 * len(keys), (agree, len(keys))
