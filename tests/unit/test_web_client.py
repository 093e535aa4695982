"""The httperf kind's downloading tool: httperf over IPv4, ab over IPv6 or when asked.

``client: ab`` over IPv4 exists for controls that keep one client on both
families (docs/ipv6.md); ``client: httperf`` on an IPv6 plan is a one-line error
when the kind is built. No root: nothing is started.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from swell.errors import SwellError
from swell.generators.base import Netns
from swell.generators.kind import RunContext
from swell.generators.web import Ab, Httperf, HttperfKind, HttperfSpec, WebGenerator
from swell.placement import Endpoint, Placement


def endpoints(client_ip: str, server_ip: str) -> tuple[Endpoint, Endpoint]:
    return (Endpoint(client_ip, Netns("c"), "c"), Endpoint(server_ip, Netns("s"), "s"))


@pytest.mark.parametrize(("client", "server", "want"), [
    ("auto", "10.0.2.1", Httperf), ("auto", "fd00::2:1", Ab),
    ("ab", "10.0.2.1", Ab), ("ab", "fd00::2:1", Ab), ("httperf", "10.0.2.1", Httperf)])
def test_client_tool(tmp_path: Path, client: str, server: str, want: type) -> None:
    c, s = endpoints("10.0.1.1" if "." in server else "fd00::1:1", server)
    gen = WebGenerator(HttperfSpec(client=client), s, c, tmp_path, 1)  # type: ignore[arg-type]
    assert gen.client_tool() is want


def test_httperf_refuses_ipv6_server(tmp_path: Path) -> None:
    c, s = endpoints("fd00::1:1", "fd00::2:1")
    kind = HttperfKind(HttperfSpec(client="httperf"))
    ctx = RunContext(tmp_path, Placement(fg_clients=(c,), fg_servers=(s,)), 1, 5.0, 0.0)
    with pytest.raises(SwellError, match="httperf cannot reach an IPv6 server"):
        kind.build(ctx)
