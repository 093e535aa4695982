"""A crafted flow table for the Harpoon tests: several clients and servers with
distinct weights, and one UDP source of each type (shared by unit and root tests).

Ten minutes of flows: 8 clients (10.0.0.1-8) fetch files from 6 servers
(10.0.1.1-6), client i making ``CLIENT_FILES[i]`` connections and server j
serving ``SERVER_FILES[j]`` of them; each connection is a client -> server
record (SYN, FIN, a 40-byte request: no file) and a server -> client record
(the file). UDP: a constant-bit-rate stream (10.0.0.1 -> 10.0.1.1:5004,
``CBR_BPS`` split into one-minute records, coalesced by the surgery), a
periodic ping-pong (10.0.0.2:40123 <-> 10.0.1.2:123 every ``PERIOD_S``) and
exponential ping-pong (10.0.0.3 -> 10.0.1.3:53, mean gap ``EXP_GAP_S``, a new
source port per query).
"""

from __future__ import annotations

import numpy as np

from swell.extract.flows.table import FlowBuilder, FlowTable, addr_pair

SPAN_S = 600.0
CLIENT_FILES = (48, 36, 27, 20, 15, 11, 8, 6)
SERVER_FILES = (60, 45, 30, 20, 10, 6)
CBR_BPS = 4000.0  # IP bit/s of the stream (one direction: server -> client)
CBR_SIZE = 200  # IP bytes per datagram
PERIOD_S = 64.0
PERIODIC_SIZE = 76
EXP_GAP_S = 5.0
EXP_SIZES = (80, 200)  # query, answer (IP bytes)
SYN, FIN, ACK = 2, 1, 16
NS = 10**9
T0_S = 1_700_000_000  # an epoch time: flow readers drop records stamped before 1996


def client(i: int) -> str:
    return f"10.0.0.{i + 1}"


def server(j: int) -> str:
    return f"10.0.1.{j + 1}"


def _addr(text: str) -> tuple[int, int]:
    return addr_pair(bytes(int(x) for x in text.split(".")))


def crafted_table(seed: int = 5) -> FlowTable:
    """The table described in the module docstring (same seed, same table)."""
    assert sum(CLIENT_FILES) == sum(SERVER_FILES)
    rng = np.random.default_rng(seed)
    b = FlowBuilder()
    e = b.exporter("crafted")

    def row(t0: float, t1: float, src: str, dst: str, sp: int, dp: int, proto: int,
            flags: int, pk: int, by: int) -> None:
        b.add_row((int((T0_S + t0) * NS), int((T0_S + t1) * NS), *_addr(src), *_addr(dst),
                   sp, dp, proto, flags, pk, by, e, 0, 1))

    servers = rng.permutation(np.repeat(np.arange(len(SERVER_FILES)), SERVER_FILES))
    k = 0
    for i, n in enumerate(CLIENT_FILES):
        starts = np.sort(rng.uniform(0, SPAN_S - 5, n))
        for t in starts:
            j = int(servers[k])
            port = 30000 + k
            size = int(rng.lognormal(8.5, 1.0)) + 200
            pk = size // 1400 + 2
            row(t, t + 0.05, client(i), server(j), port, 80, 6, SYN | ACK | FIN, 3, 160)
            row(t, t + 0.1, server(j), client(i), 80, port, 6, SYN | ACK | FIN, pk,
                size + 40 * pk)
            k += 1
    per_min = int(CBR_BPS / 8 * 60 / CBR_SIZE)
    for m in range(int(SPAN_S // 60)):
        row(60 * m, 60 * m + 59.5, server(0), client(0), 5004, 50000, 17, 0, per_min,
            per_min * CBR_SIZE)
    for t in np.arange(0.0, SPAN_S, PERIOD_S):
        row(t, t, client(1), server(1), 40123, 123, 17, 0, 1, PERIODIC_SIZE)
        row(t + 0.01, t + 0.01, server(1), client(1), 123, 40123, 17, 0, 1, PERIODIC_SIZE)
    t, q = float(rng.exponential(EXP_GAP_S)), 0
    while t < SPAN_S:
        row(t, t, client(2), server(2), 50000 + q, 53, 17, 0, 1, EXP_SIZES[0])
        row(t + 0.01, t + 0.01, server(2), client(2), 53, 50000 + q, 17, 0, 1, EXP_SIZES[1])
        t += float(rng.exponential(EXP_GAP_S))
        q += 1
    return b.table("crafted")
