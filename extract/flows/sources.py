"""Where export datagrams come from: raw datagram files, pcaps of export traffic, UDP.

All three feed one :class:`~swell.extract.flows.decoder.ExportDecoder`, so
templates learnt from one input serve data in the next (a template pcap and a
data pcap given together decode like one capture).

* Raw datagram files (one datagram per file, like logstash's spec fixtures):
  a file carries no exporter address, so the exporter is named after the file
  with its ``_tpl``/``_data``/``_opttpl``... suffix removed
  (:func:`datagram_group`): ``cisco_asa_1_tpl.dat`` and ``cisco_asa_1_data.dat``
  share a template cache, ``mikrotik_tpl.dat`` and ``yaf_tpl.dat`` do not.
  Within a group, template files go first (data before its template still
  decodes, it just waits in the buffer).
* Pcaps of export traffic, read with dpkt (swell's native reader gives header
  columns, not payloads): every UDP payload whose first two bytes say 5, 9 or
  10 is a datagram, its exporter the packet's source address. Other UDP
  packets, non-UDP packets and IP fragments (not reassembled) are counted as
  notes. Ethernet (with VLAN tags), Linux cooked (SLL, SLL2), raw IP and BSD
  loopback link types.
* A UDP collector (:func:`collect`): binds ``ADDR:PORT``, receives for the
  given time, decodes as datagrams arrive; the exporter is the sender's
  address. Network input is never trusted, so malformed datagrams are counted,
  not fatal.
"""

from __future__ import annotations

import re
import select
import socket
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from swell.errors import SwellError
from swell.extract.flows.decoder import ExportDecoder

NETFLOW_VERSIONS = (5, 9, 10)
_SUFFIX = re.compile(
    r"[_-](?:options[_-])?(?:tpls?|opttpl|tplopt|tpldata|data|templates?|option)(?:[_\-+].*|\d.*)?$"
)
_TEMPLATE_HINT = re.compile(r"tpl|templ|opt")


def datagram_group(path: Path) -> str:
    """The exporter name of a raw datagram file: its stem less the template/data suffix."""
    stem = path.name.split(".")[0]
    return _SUFFIX.sub("", stem) or stem


def _order(paths: Iterable[Path]) -> list[Path]:
    def key(p: Path) -> tuple[str, int, str]:
        hint = _TEMPLATE_HINT.search(p.name[len(datagram_group(p)) :]) is not None
        return datagram_group(p), 0 if hint else 1, p.name

    return sorted(paths, key=key)


def datagram_files(inputs: Iterable[Path]) -> list[Path]:
    """Regular, non-hidden files of the given files and directories, in feeding order."""
    out: list[Path] = []
    for p in inputs:
        if p.is_dir():
            out += [q for q in p.iterdir() if q.is_file() and not q.name.startswith(".")]
        else:
            out.append(p)
    return _order(out)


def feed_datagram_files(dec: ExportDecoder, paths: Iterable[Path]) -> int:
    """Feed one datagram per file; returns how many."""
    n = 0
    for p in datagram_files(paths):
        try:
            data = p.read_bytes()
        except OSError as exc:
            raise SwellError(p, f"cannot read ({exc.strerror})") from None
        dec.feed(data, datagram_group(p), str(p))
        n += 1
    return n


# -- pcaps of export traffic ---------------------------------------------------------------
def _ip_of_frame(dpkt: Any, linktype: int, buf: bytes) -> Any:
    if linktype == 1:
        return dpkt.ethernet.Ethernet(buf).data
    if linktype == 113:
        return dpkt.sll.SLL(buf).data
    if linktype == 276:
        return dpkt.sll2.SLL2(buf).data
    if linktype in (0, 108):
        return dpkt.loopback.Loopback(buf).data
    if linktype in (12, 14, 101, 228, 229):
        return dpkt.ip.IP(buf) if buf and buf[0] >> 4 == 4 else dpkt.ip6.IP6(buf)
    return None


def udp_payloads(path: Path, notes: Counter[str]) -> Iterable[tuple[int, str, int, bytes]]:
    """(packet number, source address, destination port, UDP payload) of a capture."""
    try:
        import dpkt
    except ImportError:
        raise SwellError(path, "reading export pcaps needs dpkt (pip install dpkt)") from None
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below; the reader keeps it
    except OSError as exc:
        raise SwellError(path, f"cannot read ({exc.strerror})") from None
    with fh:
        try:
            reader = dpkt.pcap.UniversalReader(fh)
        except (ValueError, dpkt.dpkt.Error) as exc:
            raise SwellError(path, f"not a pcap or pcapng capture ({exc})") from None
        linktype = reader.datalink()
        i = 0
        try:
            for _ts, buf in reader:
                i += 1
                try:
                    ip = _ip_of_frame(dpkt, linktype, buf)
                except (dpkt.dpkt.Error, IndexError, ValueError):
                    notes["packets whose headers do not parse"] += 1
                    continue
                if not isinstance(ip, dpkt.ip.IP | dpkt.ip6.IP6):
                    notes["non-IP packets"] += 1
                    continue
                if isinstance(ip, dpkt.ip.IP) and (ip.mf or ip.offset):
                    notes["IP fragments (not reassembled)"] += 1
                    continue
                udp = ip.data
                if not isinstance(udp, dpkt.udp.UDP):
                    notes["non-UDP packets"] += 1
                    continue
                payload = bytes(udp.data)
                ver = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else -1
                if ver not in NETFLOW_VERSIONS:
                    notes["UDP packets that are not NetFlow/IPFIX"] += 1
                    continue
                yield i, socket.inet_ntop(_family(ip), ip.src), udp.dport, payload
        except (dpkt.dpkt.NeedData, dpkt.dpkt.UnpackError, ValueError) as exc:
            raise SwellError(path, f"capture cut or corrupt after packet {i} ({exc})") from None


def _family(ip: Any) -> int:
    return socket.AF_INET if len(ip.src) == 4 else socket.AF_INET6


def feed_pcap(dec: ExportDecoder, path: Path) -> int:
    """Feed every export datagram of a capture; returns how many."""
    n = 0
    for i, src, _dport, payload in udp_payloads(path, dec.out.notes):
        dec.feed(payload, src, f"{path}#{i}")
        n += 1
    return n


def looks_like_export_pcap(path: Path, probe: int = 200) -> bool:
    """Whether a capture's first UDP packets carry plausible v5/v9/IPFIX headers."""
    notes: Counter[str] = Counter()
    try:
        for k, (_i, _src, _dport, payload) in enumerate(udp_payloads(path, notes)):
            if _plausible(payload):
                return True
            if k >= probe:
                break
    except SwellError:
        return False
    return False


def _plausible(p: bytes) -> bool:
    ver = int.from_bytes(p[:2], "big")
    if ver == 5 and len(p) >= 24:
        count = int.from_bytes(p[2:4], "big")
        return 0 < count and 24 + 48 * count <= len(p) < 24 + 48 * (count + 1)
    if ver == 10 and len(p) >= 16:
        return int.from_bytes(p[2:4], "big") == len(p)
    if ver == 9 and len(p) >= 24:
        fs_len = int.from_bytes(p[22:24], "big")
        return (
            int.from_bytes(p[20:22], "big") in (0, 1)
            or 256 <= int.from_bytes(p[20:22], "big")
            and 4 <= fs_len <= len(p) - 20
        )
    return False


# -- UDP collector ----------------------------------------------------------------------
def parse_listen(text: str) -> tuple[str, int]:
    """``ADDR:PORT`` (``[v6]:PORT`` for IPv6) -> (address, port)."""
    m = re.fullmatch(r"\[([0-9a-fA-F:.]+)\]:(\d+)|([^:\[\]]+):(\d+)", text.strip())
    if not m:
        raise SwellError(text, "listen address must be ADDR:PORT, e.g. 0.0.0.0:2055")
    addr = m.group(1) or m.group(3)
    port = int(m.group(2) or m.group(4))
    if port > 65535:
        raise SwellError(text, "port must be 0-65535")
    return addr, port


def collect(
    dec: ExportDecoder,
    listen: str,
    seconds: float,
    ready: Callable[[tuple[str, int]], None] | None = None,
    max_datagrams: int | None = None,
    idle_s: float | None = None,
) -> int:
    """Receive export datagrams on ``listen`` for ``seconds`` and decode them.

    ``ready`` is called with the bound (address, port) once the socket listens
    (port 0 picks a free one). ``idle_s``: stop that long after the last
    datagram, once one arrived (an exporter replaying a file is done).
    Returns the number of datagrams received."""
    addr, port = parse_listen(listen)
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        try:
            sock.bind((addr, port))
        except OSError as exc:
            raise SwellError(listen, f"cannot listen ({exc.strerror})") from None
        if ready is not None:
            ready(sock.getsockname()[:2])
        deadline = time.monotonic() + seconds
        n = 0
        while max_datagrams is None or n < max_datagrams:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if idle_s is not None and n:
                left = min(left, idle_s)
            r, _, _ = select.select([sock], [], [], left)
            if not r:
                if idle_s is not None and n:
                    break
                continue
            data, peer = sock.recvfrom(65535)
            n += 1
            dec.feed(data, peer[0], f"{peer[0]}:{peer[1]}#{n}")
        return n
    finally:
        sock.close()
