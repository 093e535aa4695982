"""The bulk foreground: a real iperf3 download on loopback, parsed; its results and plot."""

from __future__ import annotations

from pathlib import Path

import pytest

from swell.errors import SwellError
from swell.generators.base import GenResult, Local
from swell.generators.bulk import Bulk, BulkKind, BulkSpec, parse_iperf3, throughput
from swell.generators.kind import Window
from tests.conftest import have_tool


@pytest.mark.skipif(not have_tool("iperf3"), reason="iperf3 not installed")
def test_bulk_download_on_loopback():
    bulk = Bulk("127.0.0.1", "127.0.0.1", 1.0)
    try:
        bulk.start_server(Local())
        bulk.wait_ready(Local())
        bulk.start_client(Local())
        res = bulk.finish()
    finally:
        bulk.stop()
    assert res["mean_mbps"] > 10 and res["bytes"] > 0
    assert 8 <= len(res["series_mbps"]) <= 12 and res["interval_s"] == 0.1
    assert bulk.server is None and bulk.client is None


def test_parse_errors():
    with pytest.raises(SwellError, match="not JSON"):
        parse_iperf3("iperf3: error - unable to connect")
    with pytest.raises(SwellError, match="unable"):
        parse_iperf3('{"error": "unable to connect to server"}')
    partial = parse_iperf3('{"error": "interrupt", "intervals": [{"sum": '
                           '{"bits_per_second": 2e6}}], "end": {}}')
    assert partial["interrupted"] and partial["mean_mbps"] == 2.0


def test_series_in_the_result_and_the_kinds_own_plot(tmp_path: Path) -> None:
    """The throughput goes to ``series`` (metrics beside it); the kind draws it, also
    from a results file written when it was ``bulk.series_mbps``."""
    report = {"series_mbps": [1.0, 3.0, 2.0], "interval_s": 0.1, "mean_mbps": 2.0,
              "bytes": 75_000, "interrupted": False}
    res = BulkKind(BulkSpec()).result(GenResult("bulk", {}, {"bulk": report}),
                                      Window(0.0, 1.0, 0.0)).to_json()
    assert res["series"] == {"throughput_mbps": [1.0, 3.0, 2.0]}
    assert res["mean_mbps"] == 2.0 and "series_mbps" not in res
    old = {"kind": "bulk", "bulk": report, "series": {}, "problems": []}
    assert throughput(res) == throughput(old) == ([1.0, 3.0, 2.0], 0.1)
    groups = {"now": [{"foreground": res}], "before": [{"foreground": old}],
              "cut": [{"foreground": {"kind": "bulk"}}]}
    ((png, caption),) = BulkKind.report(groups, tmp_path).figures
    assert png == tmp_path / "foreground-bulk.png" and png.stat().st_size > 10_000
    assert "bulk TCP download" in caption
    assert BulkKind.report({"cut": groups["cut"]}, tmp_path / "none").figures == []
