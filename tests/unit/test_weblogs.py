"""Web logs and traces to counts per interval: formats, mixed files, unparseable
lines, sessions, gaps, too little data."""

from __future__ import annotations

import calendar

import numpy as np
import pytest

from swell.errors import SwellError
from swell.extract.weblogs import count_series, read_events, read_log, session_starts
from tests.conftest import DATA

CLF = '{h} - frank [{d}/Oct/2000:13:{m:02d}:{s:02d} -0700] "GET /a.gif HTTP/1.0" 200 2326'
COMBINED = CLF + ' "http://x/" "Mozilla/4.08"'


def _write(tmp_path, name, lines):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


def test_common_and_combined_lines_parse_with_time_zones(tmp_path):
    lines = [CLF.format(h="a", d=10, m=55, s=36), COMBINED.format(h="b", d=10, m=56, s=0)]
    ev = read_log(_write(tmp_path, "access.log", lines))
    assert ev.format == "clf" and ev.unparseable == 0
    # 10 Oct 2000 13:55:36 at -0700 is 20:55:36 UTC
    assert ev.times[0] == calendar.timegm((2000, 10, 10, 20, 55, 36))
    assert ev.times[1] - ev.times[0] == 24
    assert len(set(ev.hosts.tolist())) == 2


def test_mixed_formats_are_an_error_naming_the_file(tmp_path):
    lines = [CLF.format(h="a", d=10, m=i, s=0) for i in range(5)]
    lines += ["h1\t-\t971211336\tGET\t/x\t200\t10"] * 2
    p = _write(tmp_path, "mixed.log", lines)
    with pytest.raises(SwellError, match=r"mixed\.log.*mixed log formats.*first at line 6"):
        read_log(p)


def test_unparseable_lines_are_counted_and_reported(tmp_path):
    lines = [CLF.format(h="a", d=10, m=i, s=0) for i in range(8)]
    lines.insert(3, "this is not a log line")
    lines.append('1.2.3.4 - - [10/Oct/2000:13:59:00 -0700] "GET / HTTP/1.0" 200 5 "-" "cut')
    ev = read_log(_write(tmp_path, "partly.log", lines))
    assert ev.unparseable == 2 and ev.lines == 10 and len(ev.times) == 8
    assert [n for n, _ in ev.bad_examples] == [4, 10]
    (w,) = ev.warnings()
    assert "partly.log" in w and "2 of 10 lines unparseable" in w and "line 4" in w
    bad = ["garbage"] * 6 + lines[:3] + lines[4:5]
    with pytest.raises(SwellError, match="6 of 10 lines unparseable"):
        read_log(_write(tmp_path, "bad.log", bad))


def test_tsv_and_count_csv(tmp_path):
    tsv = ["host\tlogname\ttime\tmethod\turl\tresponse\tbytes"]
    tsv += [f"h{i % 3}\t-\t{804571200 + 7 * i}\tGET\t/x\t200\t10" for i in range(100)]
    ev = read_log(_write(tmp_path, "nasa.tsv", tsv))
    assert ev.format == "tsv" and len(ev.times) == 100 and ev.unparseable == 0
    csv = ["timestamp,num_request,size"]
    csv += [f"1998-05-01 00:{m:02d},{m},{10 * m}" for m in range(60)]
    ev = read_log(_write(tmp_path, "per_minute.csv", csv))
    assert ev.format == "csv" and ev.row_interval_s == 60
    s = count_series(ev, 120, "requests")
    assert s.n_intervals == 30 and s.counts[0] == 0 + 1 and s.counts[-1] == 58 + 59
    with pytest.raises(SwellError, match="multiple of 60"):
        count_series(ev, 90, "requests")


def test_session_rule():
    t = np.array([0.0, 10, 20, 5000, 5010, 0, 4000])
    h = np.array([1, 1, 1, 1, 1, 2, 2])
    assert session_starts(t, h, 1800).tolist() == [0.0, 0.0, 4000.0, 5000.0]


def test_gaps_split_segments_and_sessions_need_history(tmp_path):
    # two stretches of 40 minutes, two hours apart; one request every 10 s, 5 hosts
    t0 = 971211336
    times = [t0 + 10 * i for i in range(240)] + [t0 + 7200 + 2400 + 10 * i for i in range(240)]
    lines = [f"h{i % 5}\t-\t{t}\tGET\t/\t200\t1" for i, t in enumerate(times)]
    ev = read_log(_write(tmp_path, "gappy.tsv", ["host\tlogname\ttime\tm\tu\tr\tb"] + lines))
    s = count_series(ev, 60, "requests")
    assert len(s.segments) == 2 and all(len(x) == 39 for x in s.segments)
    assert (s.counts == 6).all()
    assert any("2 observed stretches" in n for n in s.notes)
    s = count_series(ev, 60, "sessions", timeout_s=600)
    # the first 600 s of each stretch are left out: no session can start after that
    assert s.counts.sum() == 0 and len(s.segments) == 2
    with pytest.raises(SwellError, match="longer than the session timeout"):
        count_series(ev, 60, "sessions", timeout_s=3600)


def test_one_hour_of_data_for_a_24_interval_fit_names_the_file(tmp_path):
    lines = [CLF.format(h=f"h{i}", d=10, m=i % 60, s=0) for i in range(60)]
    ev = read_log(_write(tmp_path, "hour.log", lines))
    with pytest.raises(SwellError, match=r"hour\.log.*0\.983 h.*needs at least 24"):
        count_series(ev, 3600, "requests")


def test_trace_syns_are_connection_starts():
    ev = read_events(DATA / "pcap" / "example.pcap")
    assert ev.format == "pcap"
    assert len(ev.times) == 65  # the TCP SYNs listed in ../shared/data/README.md
    assert np.all(np.diff(ev.times) >= 0)


def test_shared_logs(shared_data):
    ev = read_events(shared_data / "weblogs" / "nasa_19950701.tsv")
    assert ev.format == "tsv" and len(ev.times) == 9999 and ev.unparseable == 0
    ap = read_events(shared_data / "weblogs" / "elastic_examples_apache_logs.log")
    # 10,000 lines; line 8899's user agent is cut short (no closing quote)
    assert ap.format == "clf" and ap.lines == 10000
    assert ap.unparseable == 1 and ap.bad_examples[0][0] == 8899
    s = count_series(ap, 1, "requests")
    assert len(s.segments) == 84  # one recorded minute per hour over 83 hours
