"""The bulk foreground: a real iperf3 download on loopback, parsed."""

from __future__ import annotations

import pytest

from swell.errors import SwellError
from swell.generators.base import Local
from swell.generators.bulk import Bulk, parse_iperf3
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
