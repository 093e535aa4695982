"""Time series and directions: hand-made arrays, and a real capture against tshark."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from swell.analysis.timeseries import (
    bin_counts,
    direction_series,
    directions_by_rule,
    in_networks,
    make_packets,
    syn_directions,
)
from swell.errors import SwellError

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "data" / "pcap" / "example.pcap"
CLIENT = "10.0.0.6"  # the one local host of example.pcap


def test_bin_counts_by_hand() -> None:
    ts = np.array([0, 50_000, 100_000, 250_000, 399_999, 400_000]) + 10**12
    sz = np.array([10, 20, 30, 40, 50, 60])
    s = bin_counts(ts, sz, 100_000)
    assert s.bytes.tolist() == [30, 30, 40, 50]  # the bin holding only the last packet is partial
    assert s.packets.tolist() == [2, 1, 1, 1]
    s2 = bin_counts(ts, sz, 100_000, keep_partial=True)
    assert s2.bytes.tolist() == [30, 30, 40, 50, 60]
    s3 = bin_counts(ts, sz, 200_000, start_ns=10**12 + 100_000, end_ns=10**12 + 500_000)
    assert s3.bytes.tolist() == [70, 110] and s3.bin_s == 2e-4
    assert s3.mean_bps == pytest.approx(180 * 8 / 4e-4)
    with pytest.raises(ValueError):
        bin_counts(ts, sz, 50_000)  # below 100 us


def test_halves_split_evenly() -> None:
    s = bin_counts(np.arange(11) * 1_000_000, np.ones(11), 1_000_000, keep_partial=True)
    a, b = s.halves()
    assert a.bytes.size == b.bytes.size == 5
    assert b.start_ns == 5_000_000


def _conn(t0: int, client: int, server: int, cport: int, sport: int, with_syn: bool) -> list:
    rows = []
    if with_syn:
        rows.append((t0, 60, client, server, cport, sport, 6, 0x02))
        rows.append((t0 + 1, 60, server, client, sport, cport, 6, 0x12))
    rows.append((t0 + 2, 100, client, server, cport, sport, 6, 0x18))
    rows.append((t0 + 3, 1500, server, client, sport, cport, 6, 0x10))
    return rows


def test_syn_sender_is_the_client_even_on_a_high_server_port() -> None:
    a, b = 0x0A000001, 0x0A000002
    rows = _conn(0, a, b, 80, 40000, with_syn=True)  # client uses port 80, server 40000
    rows += _conn(10, a, b, 51000, 443, with_syn=False)  # no SYN: lower port is the server
    rows += [(20, 50, b, a, 40001, 53, 17, 0), (21, 80, a, b, 53, 40001, 17, 0)]  # UDP DNS
    cols = list(zip(*rows, strict=True))
    p = make_packets(*[np.array(c) for c in cols])
    d = syn_directions(p)
    assert d["c2s"].tolist() == [True, False, True, False, True, False, True, False]
    assert not np.any(d["c2s"] & d["s2c"])


def test_udp_roles_are_the_extractors() -> None:
    """``roles`` (the default of fidelity): a UDP flow's first sender is its client unless
    only the sender's port is well known, as ``swell extract`` decides, so a game client
    on a low port and a DNS server seen first count as the model has them; ``syn`` keeps
    the higher port; TCP is the same either way."""
    a, b, c = 0x0A000001, 0x0A000002, 0x0A000003
    rows = [(1, 300, a, b, 1000, 33335, 17, 0), (2, 100, b, a, 33335, 1000, 17, 0),  # game
            (3, 90, c, a, 53, 40001, 17, 0), (4, 50, a, c, 40001, 53, 17, 0),  # answer first
            (5, 60, b, c, 5000, 6000, 17, 0)]  # one-way: its sender is the client
    rows += _conn(10, a, b, 80, 40000, with_syn=True)
    p = make_packets(*[np.array(col) for col in zip(*rows, strict=True)])
    roles = directions_by_rule(p)["c2s"].tolist()
    assert roles == [True, False, False, True, True] + [True, False, True, False]
    assert syn_directions(p)["c2s"].tolist()[:5] == [False, True, False, True, False]
    assert directions_by_rule(p, "roles")["c2s"].tolist() == roles
    with pytest.raises(ValueError, match="udp must be"):
        syn_directions(p, udp="last")


def test_synack_decides_without_syn() -> None:
    a, b = 0x0A000001, 0x0A000002
    rows = [(1, 60, b, a, 6000, 7000, 6, 0x12), (2, 100, a, b, 7000, 6000, 6, 0x10)]
    p = make_packets(*[np.array(c) for c in zip(*rows, strict=True)])
    assert syn_directions(p)["c2s"].tolist() == [False, True]  # a received the SYN/ACK


def test_address_rule_and_networks() -> None:
    src = np.array([0x0A000001, 0xC0A80105, 0x08080808, 0x0A0000FF])
    dst = np.array([0x08080808, 0x0A000001, 0x01010101, 0x0A000001])
    p = make_packets(np.arange(4), np.full(4, 100), src, dst)
    d = directions_by_rule(p, "src=10.0.0.0/24")
    assert d["out"].tolist() == [True, False, False, False]  # 10->10 is neither
    assert d["in"].tolist() == [False, True, False, False]
    m = in_networks(p.saddr_hi, p.saddr_lo, [__import__("ipaddress").ip_network("192.168.1.5")])
    assert m.tolist() == [False, True, False, False]
    with pytest.raises(SwellError):
        directions_by_rule(p, "src=10.0.0.300")
    with pytest.raises(SwellError):
        directions_by_rule(p, "bogus")


def _tshark_io(path: Path, interval: str, filters: list[str]) -> np.ndarray:
    spec = ",".join(["io", "stat", interval, *filters])
    out = subprocess.run(["tshark", "-r", str(path), "-q", "-z", spec],
                         capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        if "<>" in line:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            rows.append([int(c) for c in cells[1:]])
    return np.array(rows)


@pytest.mark.skipif(subprocess.run(["which", "tshark"], capture_output=True).returncode != 0,
                    reason="tshark not installed")
@pytest.mark.parametrize(("interval", "bin_ns"), [("1", 10**9), ("0.01", 10**7), ("0.0001", 10**5)])
def test_real_capture_matches_tshark_io_stat(interval: str, bin_ns: int) -> None:
    from swell.analysis.timeseries import load_packets

    p = load_packets(EXAMPLE)
    assert len(p) == 4631
    ref = _tshark_io(EXAMPLE, interval, [f"ip.src=={CLIENT}", f"ip.dst=={CLIENT}"])
    dirs = directions_by_rule(p, f"src={CLIENT}")
    ours = {k: bin_counts(p.ts_ns[m], p.size[m], bin_ns, int(p.ts_ns.min()),
                          int(p.ts_ns.max()) + 1, keep_partial=True) for k, m in dirs.items()}
    n = ref.shape[0]
    assert ours["out"].bytes.size == n
    assert np.array_equal(ours["out"].packets, ref[:, 0])
    assert np.array_equal(ours["out"].bytes, ref[:, 1])
    assert np.array_equal(ours["in"].packets, ref[:, 2])
    assert np.array_equal(ours["in"].bytes, ref[:, 3])
    # The SYN rule puts every packet of this capture in one of the two directions,
    # and the local host is the client of nearly all bytes it receives.
    syn = direction_series(p, syn_directions(p), bin_ns)
    total = sum(float(s.bytes.sum()) for s in syn.values())
    whole = float(p.size[p.ts_ns < p.ts_ns.min() + syn["c2s"].bytes.size * bin_ns].sum())
    assert total == whole
    assert syn["s2c"].bytes.sum() > 0.95 * ours["in"].bytes[: syn["s2c"].bytes.size].sum()


def test_ipv6_networks() -> None:
    import ipaddress

    from swell.analysis.timeseries import Packets

    addrs = [int(ipaddress.ip_address(a)) for a in ("2001:db8::1", "2001:db8:1::5", "fe80::1")]
    hi = np.array([a >> 64 for a in addrs], dtype=np.uint64)
    lo = np.array([a & (2**64 - 1) for a in addrs], dtype=np.uint64)
    nets = [ipaddress.ip_network("2001:db8::/48")]
    assert in_networks(hi, lo, nets).tolist() == [True, False, False]
    assert in_networks(hi, lo, [ipaddress.ip_network("2001:db8::/32")]).tolist() == [
        True, True, False]
    # An IPv4 network never matches IPv6 addresses, and vice versa.
    assert not in_networks(hi, lo, [ipaddress.ip_network("0.0.0.0/0")]).any()
    z = np.zeros(3, np.uint64)
    p = Packets(np.arange(3), np.ones(3, np.int64), hi, lo, hi[::-1].copy(), lo[::-1].copy(),
                z.astype(np.uint16), z.astype(np.uint16), z.astype(np.uint8), z.astype(np.uint8))
    d = directions_by_rule(p, "src=2001:db8::/48")
    assert d["out"].tolist() == [True, False, False] and d["in"].tolist() == [False, False, True]
