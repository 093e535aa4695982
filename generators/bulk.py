"""The foreground bulk transfer: one long TCP download with iperf3.

A bulk flow is the simplest foreground that *competes*: it fills the
bottleneck queue, and a responsive background (real TCP) backs off while it
runs and ramps up when it stops, where an open-loop one (UDP playback, CBR)
keeps sending and loses packets instead. iperf3 serves on the foreground
server's address and the client downloads from it (``-R``: the server sends,
in the same direction as the web downloads), reporting its throughput every
100 ms as JSON. iperf3 takes IPv6 addresses as they are (``-B``, ``-c``).

Results: the mean, bytes and whether iperf3 was cut short as metrics, the
throughput per 100 ms as the series ``throughput_mbps``; the kind's
:meth:`BulkKind.report` draws that series per configuration (and still reads
the ``bulk.series_mbps`` of results written before the series moved there).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Literal

import numpy as np

from swell.errors import SwellError
from swell.generators.base import Generator, GenResult, Place, Tool, require
from swell.generators.kind import (
    KindResult,
    KindSpec,
    ReportPart,
    RunContext,
    TrafficKind,
    Window,
)
from swell.generators.web import tcp_probe_argv
from swell.inet import hostport
from swell.placement import Endpoint

PORT = 5201
IPERF3 = (Tool("iperf3", "iperf3"),)


class Bulk:
    """iperf3 -R from the foreground server to the foreground client."""

    def __init__(self, server_ip: str, client_ip: str, seconds: float) -> None:
        self.server_ip = server_ip
        self.client_ip = client_ip
        self.seconds = seconds
        self.server: subprocess.Popen | None = None
        self.client: subprocess.Popen | None = None

    def start_server(self, place: Place) -> None:
        require(IPERF3)
        self.server = place.popen(["iperf3", "-s", "-B", self.server_ip, "-p", str(PORT)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def wait_ready(self, client_place: Place, timeout: float = 10.0) -> None:
        """Probe the server's port from the client (never a fixed sleep)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.server is not None and self.server.poll() is not None:
                raise SwellError("iperf3", "the server exited at start")
            probe = client_place.popen(tcp_probe_argv(self.server_ip, PORT),
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if probe.wait() == 0:
                return
            time.sleep(0.02)
        raise SwellError("iperf3", f"no server on {hostport(self.server_ip, PORT)} after "
                                    f"{timeout}s")

    def start_client(self, place: Place) -> None:
        self.client = place.popen(
            ["iperf3", "-c", self.server_ip, "-B", self.client_ip, "-p", str(PORT), "-R", "-J",
             "-i", "0.1", "-t", f"{self.seconds:.1f}"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def running(self) -> bool:
        return self.client is not None and self.client.poll() is None

    def finish(self) -> dict[str, Any]:
        """Wait for the download to end (SIGINT makes iperf3 report early) and parse it."""
        if self.client is None:
            raise SwellError("iperf3", "not started")
        try:
            self.client.wait(timeout=5)  # it ends by itself after ``seconds``
        except subprocess.TimeoutExpired:
            self.client.send_signal(signal.SIGINT)
        try:
            out, _ = self.client.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.client.kill()
            out, _ = self.client.communicate()
        self.client = None
        self.stop()
        text = out.decode(errors="replace") if isinstance(out, bytes) else (out or "")
        return parse_iperf3(text)

    def stop(self) -> None:
        for p in (self.client, self.server):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.client = self.server = None


def parse_iperf3(text: str) -> dict[str, Any]:
    """Throughput per interval (Mbit/s) and the total from iperf3's JSON."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SwellError("iperf3", f"output is not JSON: {exc.msg}") from None
    if "error" in data and not data.get("intervals"):
        raise SwellError("iperf3", str(data["error"]))
    series = [iv["sum"]["bits_per_second"] / 1e6 for iv in data.get("intervals", [])]
    end = data.get("end", {}).get("sum_received", {})
    mean = end.get("bits_per_second", 0.0) / 1e6 or (float(sum(series) / len(series))
                                                       if series else 0.0)
    return {"series_mbps": [round(x, 4) for x in series], "interval_s": 0.1,
            "mean_mbps": mean, "bytes": end.get("bytes", 0),
            "interrupted": "error" in data}


# --- the bulk traffic kind (foreground: {kind: bulk}) -----------------------------------------


class BulkSpec(KindSpec):
    """One long TCP download (iperf3 -R) from the foreground server to the client."""

    kind: Literal["bulk"] = "bulk"


class BulkGenerator(Generator):
    """iperf3 as a generator: server, readiness probe, one download, its JSON report."""

    name = "bulk"
    tools = IPERF3
    native = ()

    def __init__(self, server: Endpoint, client: Endpoint, seconds: float) -> None:
        super().__init__()
        self.server, self.client = server, client
        self.bulk = Bulk(server.ip, client.ip, seconds)
        self.report: dict[str, Any] | None = None

    def start_server(self) -> None:
        self.bulk.start_server(self.server.place)

    def wait_ready(self, timeout: float = 10.0) -> None:
        self.bulk.wait_ready(self.client.place, timeout)

    def start_client(self) -> None:
        self.bulk.start_client(self.client.place)

    def running(self) -> bool:
        return self.bulk.running()

    def stop(self) -> None:
        try:
            if self.bulk.client is not None:
                self.report = self.bulk.finish()
        finally:
            self.bulk.stop()

    def collect(self, warmup_s: float = 0.0) -> GenResult:
        return GenResult(self.name, {}, {"bulk": self.report})


class BulkKind(TrafficKind):
    """A competing foreground: it fills the queue, a responsive background backs off."""

    name = "bulk"
    role = "foreground"
    Spec = BulkSpec
    tools = IPERF3

    def build(self, ctx: RunContext) -> Generator:
        pl = ctx.placement
        if not pl.fg_servers or not pl.fg_clients:
            raise SwellError("bulk", "needs a foreground client and server in the topology")
        return BulkGenerator(pl.fg_servers[0], pl.fg_clients[0], ctx.duration_s)

    def result(self, gen: GenResult | None, window: Window) -> KindResult:
        bulk = None if gen is None else gen.summary.get("bulk")
        if bulk is None:
            return KindResult(self.name)
        metrics = {k: v for k, v in bulk.items() if k != "series_mbps"}
        return KindResult(self.name, metrics, {"throughput_mbps": bulk["series_mbps"]})

    @classmethod
    def report(cls, groups: dict[str, list[dict[str, Any]]], out: Path) -> ReportPart:
        """The download's throughput over time per configuration (repetition 0)."""
        from swell.analysis import plots as P

        lines, colors = [], []
        for i, (label, runs) in enumerate(groups.items()):
            series, step = throughput(runs[0].get("foreground") or {})
            if series:
                lines.append((label, np.arange(len(series)) * step, np.asarray(series, float)))
                colors.append(P.COLORS[i % len(P.COLORS)])
        if not lines:
            return ReportPart()
        fig = P.plot_time_series(lines, title="Foreground bulk download (iperf3, 100 ms)",
                                 scale=1.0, colors=colors)
        return ReportPart([(p, CAPTION) for p in P.save(fig, out / "foreground-bulk")
                           if p.suffix == ".png"])


CAPTION = "Throughput of the foreground's bulk TCP download, competing with the background."


def throughput(fg: dict[str, Any]) -> tuple[list[float], float]:
    """A stored bulk result's throughput series (Mbit/s) and its step (s); results written
    before the series moved to ``series`` kept it as ``bulk.series_mbps``."""
    old = fg.get("bulk") or {}
    series = (fg.get("series") or {}).get("throughput_mbps") or old.get("series_mbps") or []
    return list(series), float(fg.get("interval_s") or old.get("interval_s") or 0.1)
