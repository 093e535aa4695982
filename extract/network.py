"""The network layer of the Swing model: delay, capacity and loss per host.

The monitor that recorded the trace sits between clients and servers. Every
host gets one access link per role ("side"): ``client`` for hosts seen opening
connections, ``server`` for hosts seen accepting them (a host can have both).

* **Delay** (one-way, seconds): a server's is half its monitor-server leg
  (SYN -> SYN/ACK at the monitor), a client's half its monitor-client leg
  (SYN/ACK -> client ACK), the median over the host's connections.
* **Capacity** (bit/s): packet-pair dispersion. The connection builder put
  one estimate ``8 * ip_len / gap`` per pair of back-to-back full-size segments
  (consecutive data segments of a direction with no packet of the other direction
  in between: ACK-clocked segments are no pairs) into a log-binned histogram per
  sending host (40 bins per decade); the
  capacity is the centre of the fullest bin (the mode of size/gap).
* **Loss**: retransmitted data segments over data segments sent by the host
  in that role (a passive estimate in the spirit of Benko and Veres).

Evidence thresholds (:class:`Evidence`): at least one handshake leg for delay,
``min_pairs`` packet pairs for capacity, ``min_segments`` data segments for
loss. A host below a threshold gets the documented **fallback**: a value drawn
(seeded) from the measured hosts of the same side, else of the other side; the
count of such hosts is reported and a per-host ``*_measured`` mask is kept.
When no host at all has evidence for a parameter, a stated constant is
assumed (``ASSUMED``) and the model says so.

**Beside the clients** (the capture was taken on the users' machines: the
clients' measured one-way delays have a median under ``AT_CLIENTS_S``), a
server -> client packet pair is timed after the client's own downlink, so its
rate is at most that downlink's: a client's capacity is then at least the
fastest capacity of a server seen only through it (a server that talked to
several clients may have got its mode through another's link, so it bounds
none). A client without packet pairs of its own gets that bound instead of a
draw from the servers' rates, which are its downlink's at best; the model says
how many (``assumed``).

One-directional traces: with SYNs but no SYN/ACKs, the client's ACK of the
SYN/ACK still shows the full round trip SYN -> ACK at the monitor. It is then
used as the server leg (``delay = rtt / 2``), assuming the monitor sits next to
the clients; this assumption is recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from swell.extract.conntypes import (
    CAP_BINS_PER_DECADE,
    CAP_LOG_MIN,
    CAP_NBINS,
    ConnTable,
)
from swell.extract.sessions import ready_cols

SIDES = ("client", "server")
NET_PARAMS = ("delay_s", "capacity_bps", "loss")
ASSUMED = {"delay_s": 0.010, "capacity_bps": 100e6, "loss": 0.0}
AT_CLIENTS_S = 0.5e-3  # clients this close to the monitor (median one way): it sat beside them


@dataclass(frozen=True)
class Evidence:
    """Minimum evidence per host before its own estimate is used."""

    min_pairs: int = 5
    min_segments: int = 20
    seed: int = 1


@dataclass
class NetworkModel:
    """Per side: host ids and per-host values with their ``measured`` masks."""

    sides: dict[str, dict[str, np.ndarray]]
    not_estimated: list[str] = field(default_factory=list)
    assumed: list[str] = field(default_factory=list)
    fallback_counts: dict[str, int] = field(default_factory=dict)


def _median_by(ids: np.ndarray, vals: np.ndarray, hosts: np.ndarray) -> np.ndarray:
    """Median of ``vals`` per id in ``hosts`` (sorted; every id is one of them; NaN where
    a host has no value)."""
    ok = ~np.isnan(vals)
    ids, vals = ids[ok], vals[ok]
    out = np.full(len(hosts), np.nan)
    m = len(ids)
    if m == 0:
        return out
    # values sorted by (id, value): one integer sort of id * m + the value's rank (ids
    # are host ids, below 2 * connections, so this stays far inside int64); only the
    # values are read, so how equal values are ordered does not matter
    by_val = np.argsort(vals)
    rank = np.empty(m, dtype=np.int64)
    rank[by_val] = np.arange(m)
    svals = vals[by_val][np.sort(ids * m + rank) % m]
    cnt = np.bincount(ids, minlength=int(hosts[-1]) + 1)[hosts]
    first = np.cumsum(cnt) - cnt
    has = cnt > 0
    first, cnt = first[has], cnt[has]
    out[has] = (svals[first + (cnt - 1) // 2] + svals[first + cnt // 2]) / 2
    return out


def capacity_by_host(pair_hist: dict[int, int], hosts: np.ndarray, min_pairs: int) -> np.ndarray:
    """Mode of the packet-pair histogram per host (NaN below ``min_pairs``)."""
    return _capacity_of(_host_modes(pair_hist), hosts, min_pairs)


def _host_modes(pair_hist: dict[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per host with packet pairs: host id, capacity at its histogram's mode, pair count."""
    if not pair_hist:
        z = np.zeros(0, dtype=np.int64)
        return z, z.astype(float), z
    codes = np.fromiter(pair_hist.keys(), dtype=np.int64, count=len(pair_hist))
    counts = np.fromiter(pair_hist.values(), dtype=np.int64, count=len(pair_hist))
    n, host = len(codes), codes // CAP_NBINS
    # a host's mode is its fullest bin, the first in the dict's order of equally full
    # ones (what lexsort((-counts, host)) puts first): the entry with the largest
    # counts * n + (n - 1 - index) among the host's, its entries made consecutive by a
    # stable sort by host (conntrack's dict is sorted by code, hence by host, already)
    if int(counts.max()) < (1 << 62) // n:
        sort = not np.all(host[1:] >= host[:-1])
        idx = np.argsort(host, kind="stable") if sort else np.arange(n)
        h, cnt = host[idx], counts[idx]
        starts = np.flatnonzero(np.r_[True, h[1:] != h[:-1]])
        mode = n - 1 - np.maximum.reduceat(cnt * n + (n - 1 - idx), starts) % n
    else:  # the combined key would overflow
        idx = np.lexsort((-counts, host))
        h, cnt = host[idx], counts[idx]
        starts = np.flatnonzero(np.r_[True, h[1:] != h[:-1]])
        mode = idx[starts]
    total = np.add.reduceat(cnt, starts)
    mode_host, mode_bin = h[starts], codes[mode] % CAP_NBINS
    cap = 10 ** (CAP_LOG_MIN + (mode_bin + 0.5) / CAP_BINS_PER_DECADE)
    return mode_host, cap, total


def _capacity_of(
    modes: tuple[np.ndarray, np.ndarray, np.ndarray], hosts: np.ndarray, min_pairs: int
) -> np.ndarray:
    out = np.full(len(hosts), np.nan)
    mode_host, cap, total = modes
    if len(mode_host) == 0:
        return out
    keep = np.isin(mode_host, hosts) & (total >= min_pairs)
    out[np.searchsorted(hosts, mode_host[keep])] = cap[keep]
    return out


def _loss_by(
    ids: np.ndarray, retx: np.ndarray, data: np.ndarray, hosts: np.ndarray, min_segments: int
) -> np.ndarray:
    # host ids are small non-negative integers, ``hosts`` sorted and holding every id
    size = int(hosts[-1]) + 1 if len(hosts) else 0
    r = np.bincount(ids, weights=retx, minlength=size)[hosts]
    d = np.bincount(ids, weights=data, minlength=size)[hosts]
    return np.where(d >= max(min_segments, 1), r / np.maximum(d, 1), np.nan)


def _fill(values: dict[str, dict[str, np.ndarray]], ev: Evidence, net: NetworkModel) -> None:
    """Fallback draws for hosts without evidence; assumed constants when nobody has any."""
    rng = np.random.default_rng(ev.seed)
    for param in NET_PARAMS:
        pools = {s: values[s][param][~np.isnan(values[s][param])] for s in SIDES}
        for side in SIDES:
            v = values[side][param]
            miss = np.isnan(v)
            values[side][f"{param}_measured"] = ~miss
            net.fallback_counts[f"{side}/{param}"] = int(miss.sum())
            if not miss.any():
                continue
            pool = pools[side] if len(pools[side]) else pools[SIDES[1 - SIDES.index(side)]]
            if len(pool):
                v[miss] = rng.choice(pool, size=int(miss.sum()))
                if not len(pools[side]):
                    net.assumed.append(
                        f"net/{side}/{param}: no {side} host had evidence; "
                        f"drawn from the other side's hosts"
                    )
            else:
                v[miss] = ASSUMED[param]
                net.not_estimated.append(f"net/{side}/{param}: no host had evidence")
                net.assumed.append(f"net/{side}/{param} = {ASSUMED[param]:g} for every host")


def beside_clients(client_delay_s: np.ndarray) -> float | None:
    """The median of the clients' measured one-way delays when it is under
    ``AT_CLIENTS_S`` (the monitor sat beside them), else None."""
    d = np.asarray(client_delay_s, dtype=float)
    d = d[~np.isnan(d)]
    if not d.size:
        return None
    med = float(np.median(d))
    return med if med < AT_CLIENTS_S else None


def downlink_bounds(
    client_ids: np.ndarray, server_ids: np.ndarray, clients: np.ndarray,
    servers: np.ndarray, server_cap: np.ndarray
) -> np.ndarray:
    """Per client (of the sorted ``clients``): the fastest measured capacity of the
    servers (sorted ``servers``, ``server_cap`` NaN where unmeasured) that talked to
    this client alone in the connections ``client_ids`` x ``server_ids``; NaN where
    there is none."""
    out = np.full(len(clients), np.nan)
    if not len(client_ids):
        return out
    links = np.unique(np.stack([server_ids, client_ids]), axis=1)
    srv, cli = links
    n_clients = np.bincount(srv, minlength=int(servers[-1]) + 1)[srv]
    cap = server_cap[np.searchsorted(servers, srv)]
    ok = (n_clients == 1) & ~np.isnan(cap)
    if ok.any():
        np.fmax.at(out, np.searchsorted(clients, cli[ok]), cap[ok])
    return out


def _bound_downlinks(c: dict[str, np.ndarray], values: dict[str, dict[str, np.ndarray]],
                     net: NetworkModel) -> None:
    """Beside the clients, raise each client's capacity to its downlink bound."""
    cl, sv = values["client"], values["server"]
    med = beside_clients(cl["delay_s"])
    if med is None:
        return
    bound = downlink_bounds(c["client"], c["server"], cl["hosts"], sv["hosts"],
                            sv["capacity_bps"])
    has = ~np.isnan(bound)
    if not has.any():
        return
    cl["capacity_bps"] = np.fmax(cl["capacity_bps"], bound)
    net.assumed.append(
        f"monitor beside the clients (their median one-way delay {med * 1e3:.3f} ms): "
        f"{int(has.sum())} of {len(bound)} clients' capacity is at least the fastest "
        "packet-pair rate of a server seen only through their downlink")


SYN_RTO_S = 1.0  # Linux's (RFC 6298) initial SYN retransmission timeout


def implausible_rtts(rtt: np.ndarray, net: NetworkModel) -> np.ndarray:
    """One-sided RTTs (SYN -> client ACK) without those a lost SYN or SYN/ACK inflated.

    With the SYN/ACK unseen, a retransmitted or duplicated SYN (the first copy's
    time kept) or a delayed first ACK adds a retransmission timeout to the
    estimate: an RTT at or above the initial SYN timeout is far more often such
    a retransmission than a real path. Those are left out (the hosts get the
    fallback draws) and reported, instead of being emulated as multi-second paths.
    """
    out = np.array(rtt, dtype=float, copy=True)
    bad = out >= SYN_RTO_S
    seen = int((~np.isnan(out)).sum())
    if bad.any():
        out[bad] = np.nan
        net.assumed.append(
            f"{int(bad.sum())} of {seen} one-sided RTT estimates are at or above the "
            f"{SYN_RTO_S:g} s initial SYN timeout (a retransmitted or duplicate SYN, or a "
            "delayed first ACK, measured from the first SYN): left out as implausible")
    return out


def estimate_network(
    table: ConnTable, pair_hist: dict[int, int], ev: Evidence | None = None
) -> NetworkModel:
    """Per-host delay, capacity and loss for both sides (see module docstring)."""
    ev = ev or Evidence()
    c = ready_cols(table)  # no num_pairs needed: do not wait for pending pairs
    tcp = c["proto"] == 6
    net = NetworkModel(sides={})
    server_leg = c["server_leg"]
    no_synack = np.isnan(server_leg).all() and (~np.isnan(c["one_sided_rtt"])).any()
    if no_synack:
        server_leg = implausible_rtts(c["one_sided_rtt"], net)
        net.assumed.append(
            "no SYN/ACK seen (one direction captured): server delay = half "
            "of SYN -> client ACK, i.e. the monitor is assumed next to the clients"
        )
    values: dict[str, dict[str, np.ndarray]] = {}
    modes = _host_modes(pair_hist)
    for side in SIDES:
        ids = c[side]
        # host ids are small non-negative integers: np.unique(ids) without a sort
        hosts = np.flatnonzero(np.bincount(ids)) if len(ids) else np.unique(ids)
        leg = server_leg if side == "server" else c["client_leg"]
        suffix = "s2c" if side == "server" else "c2s"
        values[side] = {
            "hosts": hosts,
            "delay_s": _median_by(ids, leg / 2, hosts),
            "capacity_bps": _capacity_of(modes, hosts, ev.min_pairs),
            "loss": _loss_by(
                ids[tcp],
                c[f"retx_{suffix}"][tcp],
                c[f"data_pkts_{suffix}"][tcp],
                hosts,
                ev.min_segments,
            ),
        }
    if no_synack:
        values["client"]["delay_s"][:] = 0.0
    else:
        _bound_downlinks(c, values, net)
    _fill(values, ev, net)
    if no_synack:
        values["client"]["delay_s_measured"][:] = False
        net.assumed.append("net/client/delay_s = 0 (one direction captured: client leg unseen)")
    net.sides = values
    return net


def quantiles(values: np.ndarray, qs: tuple[float, ...] = (0.1, 0.5, 0.9)) -> list[float]:
    """Quantiles of a sample (empty list for an empty one)."""
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    return [float(x) for x in np.quantile(v, qs)] if len(v) else []


def describe(net: NetworkModel) -> dict[str, Any]:
    """JSON-ready summary: hosts, measured counts and quantiles per side and parameter."""
    out: dict[str, Any] = {}
    for side, vals in net.sides.items():
        d: dict[str, Any] = {"hosts": int(len(vals["hosts"]))}
        for p in NET_PARAMS:
            m = vals[f"{p}_measured"]
            d[p] = {"measured_hosts": int(m.sum()), "q10_q50_q90": quantiles(vals[p][m])}
        out[side] = d
    return out
