"""Address text for both IP versions: ``host:port`` forms, families, header sizes.

Every traffic kind turns an :class:`~swell.placement.Endpoint` address into a
command line or a configuration line (``swell-gen --dst``, Apache's
``Listen``, a schedule's ``server``, an iperf3 bind address). IPv4 and IPv6
need different text for the same thing: ``10.0.2.1:80`` but ``[fd00::2:1]:80``
(the brackets keep the port apart from the address's own colons). This leaf
module holds those rules once, so a kind never builds ``f"{ip}:{port}"`` by
hand (which is wrong for IPv6), and says how many header bytes a packet of
each family carries (rates asked "at the IP level" count them).

It also says which address ranges an emulated network may use
(:func:`lab_range_problem`): private ones (RFC 1918, IPv6 unique local) and the
documentation ranges (RFC 5737's three IPv4 /24s, RFC 3849's 2001:db8::/32),
none of which is routed on the Internet, so a run can never send to or
pretend to be a real host.

Nothing here touches the network; it imports nothing from swell's stages.
"""

from __future__ import annotations

import ipaddress

from swell.errors import SwellError

IP_HEADER = {4: 20, 6: 40}  # fixed IP header bytes (IPv6: no extension headers)
L4_HEADER = {"udp": 8, "tcp": 32}  # TCP with the timestamp option, as Linux sends it


def version(ip: str) -> int:
    """4 or 6 for an address (brackets allowed); a one-line error otherwise."""
    try:
        return ipaddress.ip_address(ip.strip("[]")).version
    except ValueError:
        raise SwellError(ip, "not an IPv4 or IPv6 address") from None


def is_v6(ip: str) -> bool:
    return version(ip) == 6


def hostport(ip: str, port: int | str) -> str:
    """``a.b.c.d:port`` or ``[v6]:port`` (the form swell-gen, socat and URLs read)."""
    ip = ip.strip("[]")
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def split_hostport(text: str) -> tuple[str, int]:
    """The inverse of :func:`hostport`: ``"[fd00::1]:80"`` -> ``("fd00::1", 80)``."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise SwellError(text, "not ADDRESS:PORT (IPv6 as [ADDRESS]:PORT)")
    if host.startswith("["):
        if not host.endswith("]"):
            raise SwellError(text, "unbalanced brackets around the IPv6 address")
        host = host[1:-1]
    elif ":" in host:
        raise SwellError(text, "an IPv6 address with a port needs brackets: [ADDRESS]:PORT")
    version(host)
    return host, int(port)


def url_host(ip: str) -> str:
    """The host part of a URL: an IPv6 address in brackets."""
    ip = ip.strip("[]")
    return f"[{ip}]" if ":" in ip else ip


def header_bytes(ip: str, proto: str) -> int:
    """IP plus transport header bytes of one packet to or from ``ip``."""
    return IP_HEADER[version(ip)] + L4_HEADER[proto]


def same_family(addresses: list[str], where: str) -> int:
    """The one IP version all ``addresses`` share (4 when empty), else a one-line error."""
    versions = {version(a) for a in addresses}
    if len(versions) > 1:
        raise SwellError(where, "mixes IPv4 and IPv6 addresses: a connection needs both "
                                "ends in one family")
    return versions.pop() if versions else 4


def require_ipv4(kind: str, addresses: list[str], reason: str) -> None:
    """A kind that cannot run over IPv6 says why, in one line, before it starts."""
    if any(is_v6(a) for a in addresses):
        raise SwellError(kind, f"cannot run over IPv6: {reason}")


PRIVATE_V4 = tuple(ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12",
                                                      "192.168.0.0/16"))
DOCUMENTATION_V4 = tuple(ipaddress.IPv4Network(n) for n in ("192.0.2.0/24", "198.51.100.0/24",
                                                            "203.0.113.0/24"))  # RFC 5737
UNIQUE_LOCAL_V6 = (ipaddress.IPv6Network("fc00::/7"),)
DOCUMENTATION_V6 = (ipaddress.IPv6Network("2001:db8::/32"),)  # RFC 3849


def lab_range_problem(net: ipaddress.IPv4Network | ipaddress.IPv6Network) -> str | None:
    """Why ``net`` may not hold an emulated network (None when it may): it must lie
    inside a private or a documentation range of its family."""
    if net.version == 4:
        ok = any(net.subnet_of(r) for r in PRIVATE_V4 + DOCUMENTATION_V4)
        return None if ok else (f"{net} is not inside a private range (10/8, 172.16/12, "
                                "192.168/16) or a documentation range (192.0.2/24, "
                                "198.51.100/24, 203.0.113/24)")
    ok = any(net.subnet_of(r) for r in UNIQUE_LOCAL_V6 + DOCUMENTATION_V6)
    return None if ok else (f"{net} is not inside the unique local range fc00::/7 or the "
                            "documentation range 2001:db8::/32")
