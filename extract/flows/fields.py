"""Information elements the flow decoder reads (IANA IPFIX numbers, shared by v9).

NetFlow v9 field types below 128 are the IPFIX element ids of the same
meaning, and the v9 vendor ranges used by Cisco ASA (NSEL) line up with IPFIX
initiator/responder counters, so one table serves both. Every other element,
and every enterprise-specific element (IPFIX E bit set, with a Private
Enterprise Number), is skipped by its length: the decoder never needs to know
what it means.
"""

from __future__ import annotations

# counters (first present wins, in this order)
BYTES_IDS = (1, 85, 231, 23)  # octetDeltaCount, octetTotalCount, initiatorOctets, postOctetDelta
PACKETS_IDS = (2, 86, 298, 24)  # packetDeltaCount, packetTotalCount, initiatorPackets, postPacket
PROTO = 4
TCP_FLAGS = 6
SRC_PORT, DST_PORT = 7, 11
SRC_V4, DST_V4 = 8, 12
SRC_V6, DST_V6 = 27, 28
ICMP_TYPE_CODE = (32, 139)  # icmpTypeCodeIPv4, icmpTypeCodeIPv6
# times
END_UPTIME, START_UPTIME = 21, 22  # flowEndSysUpTime / flowStartSysUpTime (ms since boot)
START_S, END_S = 150, 151  # flowStartSeconds / flowEndSeconds
START_MS, END_MS = 152, 153  # flowStartMilliseconds / flowEndMilliseconds
START_US, END_US = 154, 155  # flowStartMicroseconds / ... (NTP timestamp format)
START_NS, END_NS = 156, 157  # flowStartNanoseconds / ... (NTP timestamp format)
START_DELTA_US, END_DELTA_US = 158, 159  # microseconds before the export time
SYS_INIT_MS = 160  # systemInitTimeMilliseconds
DURATION_MS, DURATION_US = 161, 162
OBSERVATION_MS = 323  # observationTimeMilliseconds (Cisco ASA NSEL event time)
# sampling
SAMPLING_INTERVAL = 34  # samplingInterval (v9 SAMPLING_INTERVAL)
SAMPLING_ALGORITHM = 35
SAMPLER_ID = 48  # v9 FLOW_SAMPLER_ID / IPFIX samplerId
SAMPLER_MODE = 49
SAMPLER_INTERVAL = 50  # v9 FLOW_SAMPLER_RANDOM_INTERVAL / samplerRandomInterval
SELECTOR_ID = 302
SAMPLING_PACKET_INTERVAL, SAMPLING_PACKET_SPACE = 305, 306
SAMPLING_SIZE, SAMPLING_POPULATION = 309, 310

TIME_IDS = frozenset(
    {END_UPTIME, START_UPTIME, START_S, END_S, START_MS, END_MS, START_US, END_US}
    | {START_NS, END_NS, START_DELTA_US, END_DELTA_US, SYS_INIT_MS, DURATION_MS}
    | {DURATION_US, OBSERVATION_MS}
)
SAMPLING_IDS = frozenset(
    {SAMPLING_INTERVAL, SAMPLING_ALGORITHM, SAMPLER_ID, SAMPLER_MODE, SAMPLER_INTERVAL}
    | {SELECTOR_ID, SAMPLING_PACKET_INTERVAL, SAMPLING_PACKET_SPACE}
    | {SAMPLING_SIZE, SAMPLING_POPULATION}
)
ADDRESS_IDS = frozenset({SRC_V4, DST_V4, SRC_V6, DST_V6})
# packet sampling exports (e.g. Juniper): the sampled frame's first bytes and its size
FRAME_SIZE, FRAME_SECTION = 312, 315  # dataLinkFrameSize, dataLinkFrameSection
# Elements whose value the decoder reads (as an unsigned integer unless an address).
WANTED = frozenset(
    set(BYTES_IDS)
    | set(PACKETS_IDS)
    | {PROTO, TCP_FLAGS, SRC_PORT, DST_PORT}
    | set(ICMP_TYPE_CODE)
    | ADDRESS_IDS
    | TIME_IDS
    | SAMPLING_IDS
    | {FRAME_SIZE, FRAME_SECTION}
)
# A data template is a flow template if it has one of these (else: sampling/system info).
FLOW_MARKERS = frozenset(set(BYTES_IDS) | set(PACKETS_IDS) | ADDRESS_IDS | {FRAME_SECTION})
NTP_EPOCH_OFFSET = 2_208_988_800  # seconds from 1900-01-01 to 1970-01-01


def ntp_to_ns(value: int) -> int:
    """An NTP 64-bit timestamp (seconds since 1900, 32-bit fraction) in ns since 1970."""
    sec, frac = value >> 32, value & 0xFFFFFFFF
    return (sec - NTP_EPOCH_OFFSET) * 1_000_000_000 + (frac * 1_000_000_000 >> 32)


def sampling_rate(values: dict[int, int]) -> int:
    """The 1-in-N rate an options or data record states, 0 if it states none."""
    for fid in (SAMPLER_INTERVAL, SAMPLING_INTERVAL):
        if values.get(fid, 0) > 0:
            return int(values[fid])
    interval = values.get(SAMPLING_PACKET_INTERVAL, 0)
    if interval > 0 and SAMPLING_PACKET_SPACE in values:
        return (interval + values[SAMPLING_PACKET_SPACE]) // interval
    size = values.get(SAMPLING_SIZE, 0)
    if size > 0 and values.get(SAMPLING_POPULATION, 0) > 0:
        return values[SAMPLING_POPULATION] // size
    return 0
