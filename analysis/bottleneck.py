"""Reducing a dumbbell's bottleneck captures (fidelity bench, responsiveness tests).

A :class:`swell.topologies.topology.Topology` with capture on writes one file
per bottleneck direction into its capture directory:
``bottleneck-forward.pcap`` (client side -> server side) and
``bottleneck-reverse.pcap``. Swing clients sit on the client side and open
every connection, so *forward* is the trace's client -> server direction
(``c2s``) and *reverse* is ``s2c``; this module names them so and keeps the
files apart instead of re-deriving directions from SYNs (which would also
work, but a direction file is exact by construction).

Helpers, all small and pure except the loaders:

* :func:`load_bottleneck` reads both files as ``{"c2s": Packets, "s2c": Packets}``;
  :func:`load_clients_side` reads the captures beside the background clients
  (``capture.clients`` in the topology spec: ``clients-<node>-forward.pcap``,
  what the clients send before their uplinks, and ``-reverse``, what they
  receive after their downlinks) in the same form, every client namespace's
  packets of a direction in one time order;
* :func:`without_hosts` drops packets to or from given addresses (the
  foreground hosts, so only the background is measured), :func:`only_hosts`
  keeps just those (one background among several); addresses are IPv4 or
  IPv6 text, matched on all 128 bits of the reader's address columns (IPv4
  mapped as ``::ffff:a.b.c.d``), so an IPv6 dumbbell's captures split the
  same way;
* :func:`merge_directions` concatenates both directions in time order with
  the matching direction masks, the form :func:`swell.analysis.fidelity.fidelity`
  takes;
* :func:`rate_series` bins a direction into bit/s on a fixed grid;
* :func:`window_mean` is the mean of a rate series over ``[a, b)`` seconds.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import numpy as np

from swell.analysis.timeseries import Packets, address_words, bin_counts, load_packets
from swell.errors import SwellError

DIRECTION_FILES = {"c2s": "bottleneck-forward.pcap", "s2c": "bottleneck-reverse.pcap"}


def load_bottleneck(capture_dir: str | Path) -> dict[str, Packets]:
    """Both bottleneck directions of a run: ``c2s`` = forward, ``s2c`` = reverse."""
    out = {}
    for name, fname in DIRECTION_FILES.items():
        path = Path(capture_dir) / fname
        if not path.is_file():
            raise SwellError(path, "no bottleneck capture (was capture enabled?)")
        out[name] = load_packets(path)
    return out


def load_clients_side(capture_dir: str | Path) -> dict[str, Packets]:
    """The captures beside the background clients: ``c2s`` = what they sent, ``s2c``
    = what they received, each merged over the client namespaces in time order."""
    out = {}
    for name, d in (("c2s", "forward"), ("s2c", "reverse")):
        paths = sorted(Path(capture_dir).glob(f"clients-*-{d}.pcap"))
        if not paths:
            raise SwellError(capture_dir, "no capture beside the clients "
                             "(was capture.clients on?)")
        merged, _ = merge_directions({str(p): load_packets(p) for p in paths})
        out[name] = merged
    return out


def _keys(ips: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The reader's (hi, lo) words of each address (IPv4 mapped); SwellError on bad text."""
    addrs = []
    for ip in ips:
        try:
            addrs.append(ipaddress.ip_address(ip))
        except ValueError:
            raise SwellError("hosts", f"not an IP address: {ip!r}") from None
    return address_words(addrs)


def _rows(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """128-bit addresses as one 16-byte value per row (exact equality and ``isin``)."""
    both = np.empty((np.size(lo), 2), np.uint64)
    both[:, 0], both[:, 1] = hi, lo
    return both.view(np.dtype((np.void, 16))).ravel()


def _is_one_of(hi: np.ndarray, lo: np.ndarray, keys: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Mask of the rows whose 128-bit address (hi, lo) is one of ``keys``.

    Both words are compared: IPv6 hosts on two sides of a dumbbell share their
    low word (``...::2`` in two /64s).
    """
    k_hi, k_lo = keys
    cand = np.isin(lo, k_lo)  # cheap pre-filter on the low word
    idx = np.flatnonzero(cand)
    if idx.size:
        cand[idx] = np.isin(_rows(hi[idx], lo[idx]), _rows(k_hi, k_lo))
    return cand


def touches_hosts(p: Packets, ips: list[str]) -> np.ndarray:
    """Mask of the packets whose source or destination is one of the addresses ``ips``."""
    keys = _keys(ips)
    return _is_one_of(p.saddr_hi, p.saddr_lo, keys) | _is_one_of(p.daddr_hi, p.daddr_lo, keys)


def without_hosts(p: Packets, ips: list[str]) -> Packets:
    """The packets with neither source nor destination among ``ips``."""
    return p.take(~touches_hosts(p, ips)) if ips else p


def only_hosts(p: Packets, ips: list[str]) -> Packets:
    """The packets from or to one of ``ips``."""
    return p.take(touches_hosts(p, ips))


def merge_directions(dirs: dict[str, Packets]) -> tuple[Packets, dict[str, np.ndarray]]:
    """One time-ordered :class:`Packets` of all directions, and a mask per direction."""
    names = list(dirs)
    fields = Packets.__dataclass_fields__
    cat = {k: np.concatenate([getattr(dirs[n], k) for n in names]) for k in fields}
    label = np.concatenate([np.full(len(dirs[n]), i) for i, n in enumerate(names)])
    order = np.argsort(cat["ts_ns"], kind="stable")
    merged = Packets(**{k: v[order] for k, v in cat.items()})
    label = label[order]
    return merged, {n: label == i for i, n in enumerate(names)}


def rate_series(p: Packets, bin_s: float, start_ns: int, end_ns: int) -> np.ndarray:
    """Bit/s per bin of ``bin_s`` over ``[start_ns, end_ns)`` (empty bins are zeros)."""
    bin_ns = int(round(bin_s * 1e9))
    return bin_counts(p.ts_ns, p.size, bin_ns, start_ns, end_ns).bits_per_s


def window_mean(rates: np.ndarray, bin_s: float, a_s: float, b_s: float) -> float:
    """Mean of a rate series over the bins inside ``[a_s, b_s)`` seconds from its start."""
    i, j = int(np.ceil(a_s / bin_s - 1e-9)), int(np.floor(b_s / bin_s + 1e-9))
    if j <= i:
        raise ValueError(f"window [{a_s}, {b_s}) s holds no whole bin of {bin_s} s")
    return float(np.mean(rates[i:j]))
