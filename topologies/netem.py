"""The tc engine's command lines: htb for rate with a bounded queue, netem for delay and loss.

Pure functions that turn link parameters into ``tc`` argument lists (without
the leading ``tc``); :func:`to_batch` joins them for ``tc -batch``. Nothing here
runs a command, so every form is unit-tested without root or netem.

Placement (done by :mod:`swell.topologies.engines`):

* bottleneck, per direction: on the core router's egress interface towards
  that direction, ``htb`` root with one class (rate = ceil = capacity, burst of
  one MTU so it spaces packets as closely as htb can) whose leaf is ``netem``
  (delay, loss, queue limit);
* access links, per emulated host: ``up`` on the egress of the host
  namespace's interface, classified by source address; ``down`` on the edge
  router's egress towards that namespace, classified by destination address.
  Each host gets its own htb class and netem leaf. Classification uses a u32
  hash table keyed on the address's last byte (256 buckets) so a thousand
  hosts cost a short bucket walk, not a thousand filters. Traffic of hosts
  without a class (foreground hosts, ARP) goes to htb's direct queue,
  unshaped. An IPv6 plan gives the same tree with ``protocol ipv6`` filters
  matching ``ip6 src|dst``, hashed on the last byte of the 128-bit address
  (the header word at offset 20 for the source, 36 for the destination).

The netem leaf holds both the packets in flight (the delay line) and the
packets waiting for the htb rate, so its packet limit is the configured queue
plus the link's bandwidth-delay product in MTU-sized packets. netem counts
packets, not bytes: a ``queue_bytes`` limit becomes ``queue_bytes // mtu``
packets (documented approximation of this engine; the native engine counts
bytes exactly).

Link parameters arrive validated (:class:`~swell.topologies.spec.LinkDir`);
nothing here checks them again. Rates and delays are read in engine units
from ``LinkDir.rate_bps`` and ``LinkDir.delay_us``, the same numbers the
native engine's pipes get from ``linkemu.pipe_from_link``.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Sequence
from typing import Literal

from swell.errors import SwellError
from swell.topologies.spec import LinkDir, Loss, ms_to_us

DEFAULT_QUEUE_PACKETS = 1000
UNLIMITED_RATE_BPS = 100_000_000_000  # htb needs a rate; an unshaped class gets 100 Gbit/s
DELAY_LINE_UNLIMITED = 10_000  # delay-line room when there is no rate to bound it
ETH_HEADER = 14

Match = Literal["src", "dst"]


def fmt_rate(bps: float) -> str:
    return f"{round(bps)}bit"


def fmt_delay(ms: float) -> str:
    return f"{ms_to_us(ms)}us"


def fmt_pct(p: float) -> str:
    return f"{p * 100:.6g}%"


def queue_packets(link: LinkDir, mtu: int = 1500) -> int:
    """The configured queue in packets (bytes are divided by the MTU)."""
    if link.queue_packets is not None:
        return link.queue_packets
    if link.queue_bytes is not None:
        return max(1, link.queue_bytes // mtu)
    return DEFAULT_QUEUE_PACKETS


def netem_limit(link: LinkDir, mtu: int = 1500) -> int:
    """netem's packet limit: the queue plus the packets the delay line holds."""
    if link.rate_bps is None:
        in_flight = DELAY_LINE_UNLIMITED if link.delay_ms > 0 else 0
    else:
        bdp_bytes = link.rate_bps * link.delay_ms / 1e3 / 8
        in_flight = math.ceil(bdp_bytes / mtu)
    return queue_packets(link, mtu) + in_flight


def loss_args(loss: Loss) -> list[str]:
    """netem loss arguments: ``loss random P`` or ``loss gemodel p r 1-h 1-k``."""
    if loss.kind == "bernoulli" and loss.p > 0:
        return ["loss", "random", fmt_pct(loss.p)]
    if loss.kind == "gilbert":
        return [
            "loss",
            "gemodel",
            fmt_pct(loss.p_gb),
            fmt_pct(loss.p_bg),
            fmt_pct(loss.loss_bad),
            fmt_pct(loss.loss_good),
        ]
    return []


def netem_args(link: LinkDir, mtu: int = 1500) -> list[str]:
    """The netem qdisc's own arguments (after ``netem``).

    A link with ``pairing`` is refused: netem has no packet that leaves with the one
    before it (its ``slot`` releases whole time slots), and a run that dropped it
    would emulate another link than the spec's."""
    if link.pairing > 0:
        raise SwellError("pairing", f"{link.pairing:g} asked for, but only the native engine "
                         "(swell-link) emulates it: use engine native, or pairing 0")
    args = ["limit", str(netem_limit(link, mtu))]
    if link.delay_ms > 0:
        args += ["delay", fmt_delay(link.delay_ms)]
    return args + loss_args(link.loss)


def link_rate_bps(link: LinkDir) -> float:
    """htb's rate for ``link``: its rate, or :data:`UNLIMITED_RATE_BPS` when it has none."""
    return link.rate_bps if link.rate_bps is not None else UNLIMITED_RATE_BPS


def htb_class_args(rate_bps: float, mtu: int = 1500) -> list[str]:
    """htb class parameters: rate = ceil, and one frame of burst (closest to a serialiser)."""
    frame = mtu + ETH_HEADER
    rate = fmt_rate(rate_bps)
    return [
        "rate",
        rate,
        "ceil",
        rate,
        "burst",
        f"{frame}b",
        "cburst",
        f"{frame}b",
        "quantum",
        str(frame),
    ]


def bottleneck_cmds(dev: str, link: LinkDir, mtu: int = 1500) -> list[list[str]]:
    """One direction of the bottleneck on ``dev``'s egress: htb 1:1 -> netem 10:."""
    rate = link_rate_bps(link)
    return [
        ["qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "1"],
        [
            "class",
            "add",
            "dev",
            dev,
            "parent",
            "1:",
            "classid",
            "1:1",
            "htb",
            *htb_class_args(rate, mtu),
        ],
        [
            "qdisc",
            "add",
            "dev",
            dev,
            "parent",
            "1:1",
            "handle",
            "10:",
            "netem",
            *netem_args(link, mtu),
        ],
    ]


def host_classid(index: int) -> str:
    """Class of the ``index``-th host on a device (0-based): 1:2, 1:3, ... in hex."""
    if not 0 <= index < 0xFFF0:
        raise ValueError(f"host index {index} out of range")
    return f"1:{index + 2:x}"


# (u32 protocol, match keyword, header offset of the word holding the
# address's last byte for src / dst, host prefix length) per IP version
U32_FAMILY = {
    4: ("ip", "ip", {"src": "12", "dst": "16"}, 32),
    6: ("ipv6", "ip6", {"src": "20", "dst": "36"}, 128),
}


def access_cmds(
    dev: str,
    hosts: Sequence[tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, LinkDir]],
    match: Match,
    subnet: ipaddress.IPv4Network | ipaddress.IPv6Network,
    mtu: int = 1500,
) -> list[list[str]]:
    """Per-host classes on ``dev``'s egress, selected by ``match`` address (src or dst).

    ``subnet`` holds every host address (the namespace's subnet); it scopes
    the hash table link so other traffic is left alone. Its IP version picks
    the u32 match (``ip`` or ``ip6``).
    """
    proto, keyword, offsets, host_plen = U32_FAMILY[subnet.version]
    offset = offsets[match]
    cmds = [
        ["qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "0"],
        [
            "filter",
            "add",
            "dev",
            dev,
            "parent",
            "1:",
            "prio",
            "1",
            "handle",
            "100:",
            "protocol",
            proto,
            "u32",
            "divisor",
            "256",
        ],
        [
            "filter",
            "add",
            "dev",
            dev,
            "parent",
            "1:",
            "prio",
            "1",
            "protocol",
            proto,
            "u32",
            "ht",
            "800::",
            "match",
            keyword,
            match,
            str(subnet),
            "hashkey",
            "mask",
            "0x000000ff",
            "at",
            offset,
            "link",
            "100:",
        ],
    ]
    for index, (addr, link) in enumerate(hosts):
        if addr not in subnet:
            raise ValueError(f"{addr} is not in {subnet}")
        classid = host_classid(index)
        minor = classid.split(":")[1]
        rate = link_rate_bps(link)
        bucket = f"{int(addr) & 0xFF:x}"
        cmds += [
            [
                "class",
                "add",
                "dev",
                dev,
                "parent",
                "1:",
                "classid",
                classid,
                "htb",
                *htb_class_args(rate, mtu),
            ],
            [
                "qdisc",
                "add",
                "dev",
                dev,
                "parent",
                classid,
                "handle",
                f"{minor}:",
                "netem",
                *netem_args(link, mtu),
            ],
            [
                "filter",
                "add",
                "dev",
                dev,
                "parent",
                "1:",
                "prio",
                "1",
                "protocol",
                proto,
                "u32",
                "ht",
                f"100:{bucket}:",
                "match",
                keyword,
                match,
                f"{addr}/{host_plen}",
                "flowid",
                classid,
            ],
        ]
    return cmds


def teardown_cmds(dev: str) -> list[list[str]]:
    return [["qdisc", "del", "dev", dev, "root"]]


def to_batch(cmds: Sequence[Sequence[str]]) -> str:
    """Text for ``tc -batch -`` (one command per line; our arguments hold no spaces)."""
    for cmd in cmds:
        for arg in cmd:
            if not arg or any(c.isspace() or c in "\"'\\#" for c in arg):
                raise ValueError(f"argument {arg!r} cannot go into a tc batch")
    return "".join(" ".join(cmd) + "\n" for cmd in cmds)
