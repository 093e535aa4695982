"""D-ITG's application presets (VoIP, Telnet, DNS) as packet-level distributions.

Taken from D-ITG 2.8.1 r1023 itself, the version Debian ships as ``d-itg``
(``src/ITGSend/traffic.cpp``: ``voIPParser``, ``telnetParser``,
``dnsParser``; ``ITGSend.cpp`` sends ``size = (int) PktSize->Next()``):

* VoIP (UDP): payload ``int(VAD * framesize * samples + header)`` bytes every
  ``1000 / pkts`` ms, both constant. Codecs (framesize B, samples per packet,
  packets/s): G.711.1 (80, 1, 100), G.711.2 (80, 2, 50), G.729.2 (10, 2, 50),
  G.729.3 (10, 3, 33), G.723.1 (30, 1, 26). Header: RTP 12 B, CRTP 2 B.
  ``-VAD`` sets VAD = 0.65: it scales the size only, there is no on/off
  gating. So G.711.1/RTP is 92 B at 100 pkt/s, G.729.3/CRTP/VAD is
  int(19.5 + 2) = 21 B at 33 pkt/s (the truncation matters: checked against
  ITGSend + ITGDec on loopback, docs/packet-mmpp.md).
* Telnet (TCP): IDT ``1.1 * Pareto(0.95)`` ms (newran's Pareto: ``U^(-1/shape)``,
  at least 1), so Pareto(shape 0.95, scale 1.1 ms): infinite mean, median
  2.29 ms; size ``21 + D`` bytes with D in 0..14 drawn with probabilities
  0.65, 0.13, 0.07, 0.05, 0.03, 0.01 (x4), 0.005 (x6). (The 2005 paper's
  text says shape 0.9, scale 1; the code, which is what runs, says this.)
* DNS (UDP or TCP): IDT constant ``1000 / 0.56`` ms (0.56 queries/s), size
  ``100 + 220 * U`` bytes, i.e. uniform on [100, 320) truncated: 100..319.

:func:`preset` returns a :class:`Preset` by name (``VoIP:G.711.1:RTP``,
``VoIP:G.729.3:CRTP:VAD``, ``Telnet``, ``DNS``); ``ditg_args`` is the
ITGSend application option that produces the same traffic, for running D-ITG
side by side with swell's own generator.
"""

from __future__ import annotations

from dataclasses import dataclass

from swell.errors import SwellError
from swell.extract.packetfit import Dist

# codec name -> (framesize bytes, samples per packet, packets per second): traffic.cpp
VOIP_CODECS: dict[str, tuple[float, float, float]] = {
    "G.711.1": (80.0, 1.0, 100.0),
    "G.711.2": (80.0, 2.0, 50.0),
    "G.729.2": (10.0, 2.0, 50.0),
    "G.729.3": (10.0, 3.0, 33.0),
    "G.723.1": (30.0, 1.0, 26.0),
}
VOIP_HEADERS = {"RTP": 12.0, "CRTP": 2.0}
VAD_FACTOR = 0.65
TELNET_SIZE_PROBS = (
    0.65,
    0.13,
    0.07,
    0.05,
    0.03,
    0.01,
    0.01,
    0.01,
    0.01,
    0.005,
    0.005,
    0.005,
    0.005,
    0.005,
    0.005,
)
TELNET_SIZE_OFFSET = 21
TELNET_PARETO_SHAPE, TELNET_PARETO_SCALE_MS = 0.95, 1.1
DNS_RATE_PPS = 0.56
DNS_SIZE_LOW, DNS_SIZE_SPAN = 100.0, 220.0


@dataclass(frozen=True)
class Preset:
    """A D-ITG application preset: transport, IDT (s) and payload size (bytes)."""

    name: str
    transports: tuple[str, ...]  # allowed transports, the first is D-ITG's default
    idt: Dist
    size: Dist
    ditg_args: tuple[str, ...]

    @property
    def rate_pps(self) -> float | None:
        """Packets per second when the IDT is constant, else None."""
        if self.idt.family == "constant":
            return 1.0 / float(self.idt.params["value"])
        return None

    @property
    def size_bytes(self) -> int | None:
        """The payload size when it is constant, else None."""
        if self.size.family == "constant":
            return int(self.size.params["value"])
        return None


def voip(codec: str = "G.711.1", protocol: str = "RTP", vad: bool = False) -> Preset:
    """D-ITG's ``VoIP -x CODEC -h PROTOCOL [-VAD]``."""
    if codec not in VOIP_CODECS:
        raise SwellError("VoIP preset", f"unknown codec {codec!r} (one of {sorted(VOIP_CODECS)})")
    if protocol not in VOIP_HEADERS:
        raise SwellError("VoIP preset", f"unknown protocol {protocol!r} (RTP or CRTP)")
    framesize, samples, pkts = VOIP_CODECS[codec]
    factor = VAD_FACTOR if vad else 1.0
    # the same double arithmetic as traffic.cpp, then ITGSend's (int) truncation
    size = int((factor * framesize * samples) * 1.0 + VOIP_HEADERS[protocol])
    idt_s = (1000.0 / pkts * 1.0) / 1000.0
    args = ("VoIP", "-x", codec, "-h", protocol) + (("-VAD",) if vad else ())
    name = f"VoIP:{codec}:{protocol}" + (":VAD" if vad else "")
    return Preset(
        name,
        ("udp",),
        Dist("constant", {"value": idt_s}),
        Dist("constant", {"value": float(size)}),
        args,
    )


def telnet() -> Preset:
    """D-ITG's ``Telnet`` (TCP)."""
    values = [float(TELNET_SIZE_OFFSET + i) for i in range(len(TELNET_SIZE_PROBS))]
    return Preset(
        "Telnet",
        ("tcp",),
        Dist("pareto", {"shape": TELNET_PARETO_SHAPE, "scale": TELNET_PARETO_SCALE_MS / 1000.0}),
        Dist("discrete", {"values": values, "probs": list(TELNET_SIZE_PROBS)}),
        ("Telnet",),
    )


def dns() -> Preset:
    """D-ITG's ``DNS`` (UDP by default, TCP allowed). The size is uniform on
    [100, 320) before D-ITG's truncation to whole bytes."""
    return Preset(
        "DNS",
        ("udp", "tcp"),
        Dist("constant", {"value": 1.0 / DNS_RATE_PPS}),
        Dist("uniform", {"low": DNS_SIZE_LOW, "high": DNS_SIZE_LOW + DNS_SIZE_SPAN}),
        ("DNS",),
    )


def preset_names() -> list[str]:
    """Every preset name :func:`preset` accepts."""
    names = []
    for codec in VOIP_CODECS:
        for proto in VOIP_HEADERS:
            names += [f"VoIP:{codec}:{proto}", f"VoIP:{codec}:{proto}:VAD"]
    return names + ["Telnet", "DNS"]


def preset(name: str) -> Preset:
    """A preset by name: ``VoIP:<codec>[:RTP|CRTP][:VAD]``, ``Telnet`` or ``DNS``
    (case-insensitive for the keywords)."""
    parts = name.split(":")
    head = parts[0].lower()
    if head == "telnet" and len(parts) == 1:
        return telnet()
    if head == "dns" and len(parts) == 1:
        return dns()
    if head == "voip":
        rest = parts[1:]
        vad = bool(rest) and rest[-1].upper() == "VAD"
        if vad:
            rest = rest[:-1]
        codec = rest[0] if rest else "G.711.1"
        proto = rest[1].upper() if len(rest) > 1 else "RTP"
        if len(rest) > 2:
            raise SwellError(name, "preset is VoIP:<codec>[:RTP|CRTP][:VAD]")
        return voip(codec, proto, vad)
    raise SwellError(name, f"unknown preset (known: {', '.join(preset_names())})")
