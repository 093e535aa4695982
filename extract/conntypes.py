"""The connection table's types and the constants every reconstruction step shares.

This module is the leaf of connection reconstruction: it imports nothing from
swell, and the modules that build, finish and read the table import from it, so
their imports go one way: ``connections`` (the builder) imports ``conntable`` (its
``finish``), which imports ``sessions`` (the request/response pairs); all three, and
``network`` and ``model``, import this module; none imports back (``conntable``
names ``ConnectionBuilder`` for type checking only).

* :class:`ConnTable`: finished connections, one row each, oriented client/server,
  plus their request/response pairs (what ``ConnectionBuilder.finish`` returns).
* :class:`PendingTable`: a :class:`ConnTable` whose pairs are still being computed by
  the native tracker in a worker thread (see :mod:`swell.extract.conntable`);
  :func:`swell.extract.sessions.ready_cols` reads its other columns without waiting.
* ``WELL_KNOWN`` / ``KNOWN_PORTS``: the server ports that name applications
  (sessions) and decide which side is the server when no handshake was seen
  (conntable).
* ``TCP``, ``UDP``, the packet-pair histogram's binning (``CAP_*``: connections
  fills it, conntable merges the native tracker's, network reads it) and
  :func:`addr_text`.

The names stay importable from :mod:`swell.extract.connections` too, where most
callers have always found them.
"""

from __future__ import annotations

import ipaddress
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

TCP, UDP = 6, 17

# Packet-pair histogram: log-spaced bins from 10 kbit/s to 100 Gbit/s.
CAP_BINS_PER_DECADE = 40
CAP_LOG_MIN, CAP_LOG_MAX = 4.0, 11.0
CAP_NBINS = int((CAP_LOG_MAX - CAP_LOG_MIN) * CAP_BINS_PER_DECADE)

# fmt: off
WELL_KNOWN: dict[tuple[int, int], str] = {
    (TCP, 20): "ftp-data", (TCP, 21): "ftp", (TCP, 22): "ssh", (TCP, 23): "telnet",
    (TCP, 25): "smtp", (TCP, 53): "dns", (UDP, 53): "dns", (UDP, 67): "dhcp", (UDP, 68): "dhcp",
    (TCP, 80): "http", (TCP, 110): "pop3", (UDP, 123): "ntp", (UDP, 137): "netbios",
    (UDP, 138): "netbios", (TCP, 139): "netbios", (TCP, 143): "imap", (UDP, 161): "snmp",
    (TCP, 179): "bgp", (TCP, 389): "ldap", (TCP, 443): "https", (UDP, 443): "quic",
    (TCP, 445): "smb", (TCP, 465): "smtps", (UDP, 500): "ike", (UDP, 514): "syslog",
    (TCP, 554): "rtsp", (TCP, 587): "smtp", (TCP, 631): "ipp", (TCP, 853): "dot",
    (TCP, 993): "imaps", (TCP, 995): "pop3s", (TCP, 1194): "openvpn", (UDP, 1194): "openvpn",
    (TCP, 1433): "mssql", (UDP, 1900): "ssdp", (TCP, 1935): "rtmp", (TCP, 3306): "mysql",
    (TCP, 3389): "rdp", (UDP, 3478): "stun", (UDP, 4500): "ike", (TCP, 5222): "xmpp",
    (TCP, 5228): "gcm", (UDP, 5353): "mdns", (TCP, 5432): "postgres", (UDP, 5355): "llmnr",
    (TCP, 5900): "vnc", (TCP, 6379): "redis", (TCP, 8000): "http-alt", (TCP, 8080): "http-alt",
    (TCP, 8443): "https-alt", (TCP, 9000): "http-alt",
}
# fmt: on
KNOWN_PORTS = np.zeros((256, 65536), dtype=bool)  # [proto, port]: in WELL_KNOWN
for _p, _port in WELL_KNOWN:
    KNOWN_PORTS[_p, _port] = True


def addr_text(hi: int, lo: int) -> str:
    """Address text for the reader's (hi, lo) pair (IPv4 as ``::ffff:a.b.c.d``)."""
    if hi == 0 and (lo >> 32) == 0xFFFF:
        return f"{lo >> 24 & 255}.{lo >> 16 & 255}.{lo >> 8 & 255}.{lo & 255}"
    return str(ipaddress.IPv6Address((hi << 64) | lo))


@dataclass
class ConnTable:
    """Finished connections (one row each, oriented) and their request/response pairs.

    Times are seconds since ``t0`` (the first packet's timestamp, ``t0_ns``).
    Handshake legs are NaN where the packets were not seen.
    """

    t0_ns: int
    hosts: list[str]  # host id -> address text
    cols: dict[str, np.ndarray]  # per connection
    pairs: dict[str, np.ndarray]  # per request/response pair (``conn`` = row)
    stats: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.cols["proto"])


class PendingTable(ConnTable):
    """A :class:`ConnTable` whose pairs are still being computed in a worker thread.

    Reading ``pairs`` or ``cols`` waits for them (re-raising the worker's error) and
    adds the ``num_pairs`` column; :meth:`ready_cols` gives the other columns without
    waiting. Pickling or copying gives a plain, complete :class:`ConnTable`.
    """

    def __init__(
        self,
        t0_ns: int,
        hosts: list[str],
        cols: dict[str, np.ndarray],
        stats: dict[str, Any],
        pairs: Future[dict[str, np.ndarray]],
    ) -> None:
        # the dataclass fields, but ``cols`` and ``pairs`` behind the properties below
        self.t0_ns, self.hosts, self.stats = t0_ns, hosts, stats
        self._cols, self._pairs = cols, {}
        self._future: Future[dict[str, np.ndarray]] | None = pairs
        self._lock = threading.Lock()

    def _wait(self) -> PendingTable:
        if self._future is not None:
            with self._lock:
                if self._future is not None:
                    pairs = self._future.result()
                    n = len(self._cols["proto"])
                    self._cols["num_pairs"] = np.bincount(pairs["conn"], minlength=n).astype(
                        np.int64
                    )
                    self._pairs, self._future = pairs, None
        return self

    @property
    def cols(self) -> dict[str, np.ndarray]:  # type: ignore[override]
        return self._wait()._cols

    @cols.setter
    def cols(self, value: dict[str, np.ndarray]) -> None:
        self._wait()._cols = value

    @property
    def pairs(self) -> dict[str, np.ndarray]:  # type: ignore[override]
        return self._wait()._pairs

    @pairs.setter
    def pairs(self, value: dict[str, np.ndarray]) -> None:
        self._wait()._pairs = value

    def ready_cols(self) -> dict[str, np.ndarray]:
        """The columns, without waiting: all but ``num_pairs`` while the pairs are pending
        (the dict then gains ``num_pairs``; do not modify it)."""
        return self._cols

    def __len__(self) -> int:
        return len(self._cols["proto"])

    def __reduce__(self) -> tuple[Any, ...]:
        return (ConnTable, (self.t0_ns, self.hosts, self.cols, self.pairs, self.stats))
