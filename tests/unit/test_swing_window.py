"""The transfer-time estimate a Swing target counts a window's bytes with (docs/scale.md,
section 8): slow start then the path's rate, RREs chained by their last connection's end,
bytes counted by overlap with a segment."""

from __future__ import annotations

import pytest

from swell.analysis.swing_window import (
    IW,
    MSS,
    PathEstimate,
    bytes_in,
    earliest_in,
    path_estimate,
    spans,
    transfer_s,
)
from swell.generators.schedule import Conn, Rre, Session


def conn(rsp: int, think: float = 0.0, offset: float = 0.0, proto: str = "tcp") -> Conn:
    return Conn("1:80", proto, "http", offset, ((100, rsp, think),))


def test_transfer_time_is_slow_start_then_the_rate():
    path = PathEstimate(0.1, 8e6)  # 1 MB/s
    assert transfer_s(0, path) == 0.0
    assert transfer_s(1000, path) == pytest.approx(0.05 + 1000 * 8 / 8e6)  # first window
    # 4 MB: the window doubles per RTT until it carries the rate (100 kB per RTT here),
    # three rounds of slow start (14.5, 29, 58 kB), then the rest at 1 MB/s
    sent = IW * MSS * (1 + 2 + 4)
    assert transfer_s(4_000_000, path) == pytest.approx(0.3 + (4_000_000 - sent) / 1e6 + 0.05)
    # a faster path is never slower
    assert transfer_s(4_000_000, PathEstimate(0.1, 80e6)) < transfer_s(4_000_000, path)


def test_rres_follow_the_previous_rres_last_connection():
    path = PathEstimate(0.1, 8e6)
    s = Session(0, 0.0, "", (Rre(0.0, (conn(1_000_000), conn(1000, offset=0.2))),
                             Rre(0.5, (conn(1000),))))
    (a0, a1, na), (b0, b1, _), (c0, c1, nc) = spans(s, 2.0, path)
    assert a0 == 2.0 and b0 == pytest.approx(2.2) and na == 1_000_100
    assert a1 > 3.0  # 1 MB at 1 MB/s after a handshake
    assert c0 == pytest.approx(max(a1, b1) + 0.5)  # the gap counts from the end
    # the earliest start ignores transfer time: the second RRE would start at 2.5
    assert earliest_in(s, 2.0, 2.4, 2.6) == nc


def test_bytes_count_by_overlap_with_the_segment():
    spans_ = [(1.0, 3.0, 1000), (5.0, 5.0, 10)]
    assert bytes_in(spans_, 0.0, 2.0) == pytest.approx(500)
    assert bytes_in(spans_, 2.0, 10.0) == pytest.approx(510)
    assert bytes_in(spans_, 3.0, 5.0) == 0  # an instant transfer counts where it is


def test_the_path_is_the_median_host_and_the_slowest_known_rate():
    p = path_estimate([1.0, 5.0, 9.0], [2.0], [10.0, None, 20.0], bottleneck_delay_ms=20.0)
    assert p.rtt_s == pytest.approx((2 * (5.0 + 2.0) + 20.0) / 1e3)
    assert p.rate_bps == 10e6
    assert path_estimate([], [], [None]).rate_bps > 1e9  # nothing known: no limit
    with pytest.raises(ValueError):
        PathEstimate(0.1, 0.0)


def test_a_request_weight_times_requests_at_their_weighted_size():
    """``req_weight`` (a variant's request factor undone) times a request at that share
    of its bytes; responses and the bytes counted are unchanged."""
    plain, weighted = PathEstimate(0.1, 8e6), PathEstimate(0.1, 8e6, req_weight=1 / 16)
    big = Session(0, 0.0, "", (Rre(0.0, (Conn("1:80", "tcp", "http", 0.0,
                                              ((160_000, 50_000, 0.0),)),)),))
    small = Session(0, 0.0, "", (Rre(0.0, (Conn("1:80", "tcp", "http", 0.0,
                                                ((10_000, 50_000, 0.0),)),)),))
    (_, end_w, n_w), = spans(big, 0.0, weighted)
    (_, end_s, _), = spans(small, 0.0, plain)
    (_, end_p, _), = spans(big, 0.0, plain)
    assert end_w == pytest.approx(end_s) and end_p > end_w + 0.1 and n_w == 210_000
    with pytest.raises(ValueError):
        PathEstimate(0.1, 8e6, req_weight=0.0)
