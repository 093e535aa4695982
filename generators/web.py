"""The foreground web workload: Apache serving objects, httperf fetching them.

As in the study (seed 004, section 3), one Apache server (Debian ``apache2``)
sits on the foreground server's address and one httperf client fetches objects
of a configured size back to back (one request per connection, the next
connection as soon as the previous one closes) for the run's duration.

Apache is started by swell with its own configuration file in the run's work
directory (its own pid file, logs, mutex and runtime dir; the system's Apache
is never touched), listening only on the foreground server's address.

httperf prints aggregate statistics only, so per-request response times come
from an exact, independent source: a packet capture at the client's
interface. For every connection to the server port, the response time is the
time from the client's SYN to the last payload byte the server sent, both
stamped by the kernel at the client. httperf's own mean "connection time" is
kept in the results and tests check that the two agree.

IPv6: Apache listens on ``[address]:port`` and the capture is read the same
way, but httperf 0.9 resolves its ``--server`` with ``gethostbyname`` (IPv4
only), so over an IPv6 address plan the client is ApacheBench (``ab``, Debian
``apache2-utils``, installed with Apache) with the same load: one request per
connection, the next as soon as the previous one closed, for the whole run
(``-c 1``), stopped by SIGINT, after which it prints its statistics. Response
times come from the client capture for both clients; ab's own numbers
(millisecond resolution) are kept beside them under the same names.

Processes run through a ``Place`` (:mod:`swell.generators.base`: this
namespace, a named namespace, or a topology node), so this module does not
depend on how the namespaces were built.
"""

from __future__ import annotations

import ipaddress
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field

from swell.errors import SwellError
from swell.generators.base import Generator, GenResult, Place, require
from swell.generators.kind import KindResult, KindSpec, RunContext, Tool, TrafficKind, Window
from swell.inet import hostport, is_v6
from swell.placement import Endpoint
from swell.signals import HANDLER_WAIT_S, wait_catching
from swell.tcpdump import Tcpdump, tcpdump_argv

APACHE_BIN = "/usr/sbin/apache2"
APACHE = Tool(APACHE_BIN, "apache2")
APACHE_MODULES = Path("/usr/lib/apache2/modules")
RECV_BUFFER = 4 << 20
SEND_BUFFER = 64 << 10


# Processes run through a ``Place`` from :mod:`swell.generators.base` (``Local``, ``Netns`` or
# ``Via`` a topology node); anything with ``popen(argv, **kw)`` works.
Launcher = Place


def check_dependencies() -> None:
    """Raise :class:`EnvironmentProblem` when Apache or httperf is missing."""
    require((APACHE, Tool("httperf", "httperf")))


def object_name(size: int) -> str:
    return f"obj_{size}"


def apache_config(workdir: Path, address: str, port: int, docroot: Path | None = None) -> str:
    """A self-contained Apache configuration confined to ``workdir`` (and ``docroot``)."""
    docroot = docroot or workdir / "www"
    mods = ("mpm_event", "authz_core")
    lines = ["ServerRoot /etc/apache2"]
    lines += [f"LoadModule {m}_module {APACHE_MODULES / f'mod_{m}.so'}" for m in mods]
    lines += [
        f"Listen {hostport(address, port)}",
        "ServerName swell-foreground",
        "User www-data",
        "Group www-data",
        f"PidFile {workdir / 'apache.pid'}",
        f"ErrorLog {workdir / 'apache-error.log'}",
        "LogLevel warn",
        f"Mutex file:{workdir} default",
        f"DefaultRuntimeDir {workdir}",
        f"DocumentRoot {docroot}",
        "KeepAlive Off",
        "EnableSendfile On",
        "MaxRequestWorkers 64",
        f"<Directory {docroot}>",
        "  Require all granted",
        "</Directory>",
    ]
    return "\n".join(lines) + "\n"


def make_objects(docroot: Path, sizes: list[int], seed: int) -> None:
    """Write one object of each size (random bytes: nothing compresses them)."""
    docroot.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for size in sizes:
        path = docroot / object_name(size)
        if not path.exists() or path.stat().st_size != size:
            path.write_bytes(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
    for p in [docroot, *docroot.iterdir()]:
        p.chmod(0o755 if p.is_dir() else 0o644)


def tcp_probe_argv(address: str, port: int) -> list[str]:
    """A command that succeeds once ``address:port`` accepts a TCP connection."""
    return ["bash", "-c", f"exec 3<>/dev/tcp/{address}/{port}"]


class ApacheServer:
    """Apache on one address, with swell's own configuration."""

    def __init__(self, workdir: Path, address: str, port: int = 80) -> None:
        self.workdir = workdir
        self.address = address
        self.port = port
        self.proc: subprocess.Popen | None = None
        self.docroot: Path | None = None

    def start(self, launcher: Launcher, sizes: list[int], seed: int = 1) -> None:
        """Write the objects and the configuration, start Apache in the foreground.

        Apache's workers run as www-data, which may not traverse the run directory
        (e.g. under a 0700 folder), so the objects live in their own world-readable
        temporary folder, removed by :meth:`stop`.
        """
        check_dependencies()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.docroot = Path(tempfile.mkdtemp(prefix="swell-www-"))
        self.docroot.chmod(0o755)
        make_objects(self.docroot, sizes, seed)
        conf = self.workdir / "apache.conf"
        conf.write_text(apache_config(self.workdir, self.address, self.port, self.docroot))
        self.proc = launcher.popen(
            [APACHE_BIN, "-f", str(conf), "-DFOREGROUND"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def wait_ready(self, launcher: Launcher, timeout: float = 10.0) -> None:
        """Probe until the server accepts connections (never a fixed sleep)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                log = self.workdir / "apache-error.log"
                tail = log.read_text().strip().splitlines()[-1:] if log.exists() else []
                raise SwellError("apache2", f"exited at start: {' '.join(tail) or 'no log'}")
            probe = launcher.popen(
                tcp_probe_argv(self.address, self.port),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            if probe.wait() == 0:
                return
            time.sleep(0.02)
        raise SwellError("apache2", f"not accepting on {hostport(self.address, self.port)} "
                                    f"after {timeout}s")

    def stop(self) -> None:
        if self.docroot is not None:
            shutil.rmtree(self.docroot, ignore_errors=True)
            self.docroot = None
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


@dataclass(frozen=True)
class HttperfSummary:
    """What httperf reports at the end (its aggregate numbers)."""

    connections: int
    replies: int
    duration_s: float
    conn_time_ms_avg: float
    conn_time_ms_median: float
    errors: int
    status_2xx: int
    status_other: int
    raw: str


def parse_httperf(text: str) -> HttperfSummary:
    """Parse httperf's closing statistics."""

    def grab(pattern: str, cast: type = float, default: Any = None) -> Any:
        m = re.search(pattern, text)
        if m is None:
            if default is not None:
                return default
            raise SwellError("httperf", f"output lacks {pattern!r}")
        return cast(m.group(1))

    return HttperfSummary(
        connections=grab(r"Total: connections (\d+)", int),
        replies=grab(r"replies (\d+) test-duration", int),
        duration_s=grab(r"test-duration ([\d.]+) s"),
        conn_time_ms_avg=grab(r"Connection time \[ms\]: min [\d.]+ avg ([\d.]+)"),
        conn_time_ms_median=grab(r"Connection time \[ms\]: .*median ([\d.]+)"),
        errors=grab(r"Errors: total (\d+)", int),
        status_2xx=grab(r"2xx=(\d+)", int, 0),
        status_other=sum(int(n) for n in re.findall(r"[1345]xx=(\d+)", text)),
        raw=text,
    )


class Httperf:
    """httperf fetching one object per connection, back to back."""

    def __init__(self, server: str, port: int, object_bytes: int, max_conns: int = 10_000_000):
        self.server = server
        self.port = port
        self.object_bytes = object_bytes
        self.max_conns = max_conns
        self.proc: subprocess.Popen | None = None

    def argv(self) -> list[str]:
        return [
            "httperf", "--hog", "--server", self.server, "--port", str(self.port),
            "--uri", "/" + object_name(self.object_bytes), "--num-conns", str(self.max_conns),
            "--num-calls", "1", "--timeout", "60",
            # httperf's default 16 KB receive buffer caps a download at 16 KB per round
            # trip (6.5 Mbit/s at 20 ms); ask for more (the kernel caps it at rmem_max).
            "--recv-buffer", str(RECV_BUFFER), "--send-buffer", str(SEND_BUFFER),
        ]

    def start(self, launcher: Launcher) -> None:
        check_dependencies()
        self.proc = launcher.popen(self.argv(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    tool = "httperf"

    def parse(self, text: str) -> HttperfSummary:
        return parse_httperf(text)

    def stop(self) -> HttperfSummary:
        """SIGINT makes the tool print its statistics and exit."""
        if self.proc is None:
            raise SwellError(self.tool, "not started")
        if self.proc.poll() is None:
            # a SIGINT before the tool's handler is in place kills it with nothing printed
            wait_catching(self.proc, signal.SIGINT, HANDLER_WAIT_S)
            self.proc.send_signal(signal.SIGINT)
        try:
            out, _ = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        code, self.proc = self.proc.returncode, None
        text = out.decode(errors="replace") if isinstance(out, bytes) else (out or "")
        try:
            return self.parse(text)
        except SwellError as err:  # say what the tool did instead, for the next reader
            tail = " | ".join(text.strip().splitlines()[-3:]) or "nothing"
            raise SwellError(self.tool, f"{err.message} (exit status {code}; "
                                        f"its output ended with: {tail[-300:]})") from None


def parse_ab(text: str) -> HttperfSummary:
    """ApacheBench's closing statistics under httperf's names (times in ms, whole ms)."""

    def grab(pattern: str, cast: type = float, default: Any = None) -> Any:
        m = re.search(pattern, text)
        if m is None:
            if default is not None:
                return default
            raise SwellError("ab", f"output lacks {pattern!r}")
        return cast(m.group(1))

    complete = grab(r"Complete requests:\s+(\d+)", int)
    failed = grab(r"Failed requests:\s+(\d+)", int)
    non2xx = grab(r"Non-2xx responses:\s+(\d+)", int, 0)
    total = re.search(r"Total:\s+(\d+)\s+(\d+)\s+[\d.]+\s+(\d+)\s+\d+", text)
    return HttperfSummary(
        connections=complete + failed,
        replies=complete,
        duration_s=grab(r"Time taken for tests:\s+([\d.]+) seconds"),
        conn_time_ms_avg=float(total.group(2)) if total else 0.0,
        conn_time_ms_median=float(total.group(3)) if total else 0.0,
        errors=failed,
        status_2xx=complete - non2xx,
        status_other=non2xx,
        raw=text,
    )


class Ab(Httperf):
    """ApacheBench with httperf's load, for an IPv6 server (httperf resolves IPv4 only)."""

    def argv(self) -> list[str]:
        # -r: a socket error does not end the run; -s 60: httperf's --timeout
        return ["ab", "-r", "-c", "1", "-n", str(min(self.max_conns, 1_000_000)), "-s", "60",
                f"http://{hostport(self.server, self.port)}/"
                f"{object_name(self.object_bytes)}"]

    tool = "ab"

    def parse(self, text: str) -> HttperfSummary:
        return parse_ab(text)


def response_times(
    ts_ns: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    sport: np.ndarray,
    dport: np.ndarray,
    flags: np.ndarray,
    payload: np.ndarray,
    server: int,
    port: int,
    min_bytes: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-connection (start, response time) in seconds from a client-side capture.

    Inputs are packet columns (addresses as integers, any one-to-one form; ``server``
    in the same form). A connection is the
    client's port; it starts at the client's SYN and ends at the last payload
    byte from the server. Only complete exchanges count: connections without a
    SYN in the capture, without payload back, or that the server did not close
    (FIN; the server closes after each response) or that carried fewer than
    ``min_bytes`` of payload back are left out, so a transfer cut short at the
    end of the run, or an error page, never enters the results.
    """
    fin, syn, ack = 0x01, 0x02, 0x10
    to_srv = (dst == server) & (dport == port)
    from_srv = (src == server) & (sport == port)
    rel = to_srv | from_srv
    cport = np.where(to_srv, sport, dport)[rel].astype(np.int64)
    ts = ts_ns[rel].astype(np.int64)
    is_syn = (to_srv & ((flags & syn) != 0) & ((flags & ack) == 0))[rel]
    is_data = (from_srv & (payload > 0))[rel]
    got = np.where(from_srv, payload, 0)[rel].astype(np.int64)
    is_fin = (from_srv & ((flags & fin) != 0))[rel]
    if len(ts) == 0:
        return np.zeros(0), np.zeros(0)
    order = np.lexsort((ts, cport))
    cport, ts, is_syn = cport[order], ts[order], is_syn[order]
    is_data, is_fin, got = is_data[order], is_fin[order], got[order]
    # A new connection starts at every SYN and wherever the client port changes (a reused
    # port gives a new SYN, so connections on the same port stay apart).
    new = is_syn.copy()
    new[0] = True
    new[1:] |= cport[1:] != cport[:-1]
    heads = np.flatnonzero(new)
    starts = ts[heads]
    has_syn = is_syn[heads]
    data_ts = np.where(is_data, ts, -1)
    ends = np.maximum.reduceat(data_ts, heads)
    closed = np.maximum.reduceat(is_fin.astype(np.int8), heads) > 0
    nbytes = np.add.reduceat(got, heads)
    ok = has_syn & closed & (ends > starts) & (nbytes >= min_bytes)
    return starts[ok] / 1e9, (ends[ok] - starts[ok]) / 1e9


def foreground_result(pcap: Path | None, server_ip: str, port: int, window: Window,
                      summary: HttperfSummary | None, object_bytes: int = 1
                      ) -> dict[str, Any]:
    """Per-request response times from the client capture, and httperf's own numbers.

    Requests count when they start in the measurement window and complete before
    httperf was stopped: httperf counts only the connections it closed before the stop
    (SIGINT right after the window's end), so a response that completes in the capture
    after the stop would be a sample httperf never saw.
    """
    out: dict[str, Any] = {"response_times_s": [], "starts_s": []}
    if pcap is not None and pcap.exists() and pcap.stat().st_size > 24:
        from swell.extract.reader import addr_to_cols, read_all, v4_to_int

        ch = read_all(pcap)
        if is_v6(server_ip):
            # one-to-one integer form of the columns for response_times: 1 for the
            # server's address, 0 for any other (the client's)
            ip = np.asarray(ch.ipver) == 6
            hi, lo = addr_to_cols(server_ip)
            src = ((ch.saddr_hi[ip] == hi) & (ch.saddr_lo[ip] == lo)).astype(np.int64)
            dst = ((ch.daddr_hi[ip] == hi) & (ch.daddr_lo[ip] == lo)).astype(np.int64)
            server = 1
        else:
            ip = np.asarray(ch.ipver) == 4
            src, dst = v4_to_int(ch.saddr_lo[ip]), v4_to_int(ch.daddr_lo[ip])
            server = int(ipaddress.IPv4Address(server_ip))
        starts, rts = response_times(
            np.asarray(ch.ts_ns, np.int64)[ip], src, dst,
            np.asarray(ch.sport)[ip], np.asarray(ch.dport)[ip], np.asarray(ch.tcp_flags)[ip],
            np.asarray(ch.payload_len)[ip], server, port, min_bytes=object_bytes,
        )
        t0 = window.start
        if starts.size and abs(starts[0] - t0) < 3600:
            keep = starts >= t0 - 0.5  # httperf's first SYN follows the window's start
            keep &= starts + rts <= window.end
        else:
            keep = np.ones(starts.size, dtype=bool)
        out["response_times_s"] = rts[keep].round(6).tolist()
        out["starts_s"] = (starts[keep] - t0).round(6).tolist()
        out["capture_packets"] = int(ip.sum())
    if summary is not None:
        out["httperf"] = {k: v for k, v in vars(summary).items() if k != "raw"}
    return out


# --- the httperf traffic kind (foreground: {kind: httperf, ...}) ------------------------------


class HttperfSpec(KindSpec):
    """httperf fetching one object per connection from Apache, back to back."""

    kind: Literal["httperf"] = "httperf"
    object_bytes: int = Field(1_000_000, gt=0)
    objects: int = Field(0, ge=0, description="0: fetch back to back for the whole run")
    port: int = Field(80, ge=1, le=65535, description="Apache's port on the server host")
    client: Literal["auto", "httperf", "ab"] = Field(
        "auto", description="the downloading tool: auto = httperf over IPv4, ApacheBench over "
                            "IPv6 (httperf resolves IPv4 only); ab over IPv4 too for a control "
                            "with one client on both families")


class WebGenerator(Generator):
    """Apache on the foreground server, httperf and a capture on the foreground client."""

    name = "httperf"

    def __init__(self, spec: HttperfSpec, server: Endpoint, client: Endpoint, out: Path,
                 seed: int) -> None:
        super().__init__()
        self.spec = spec
        self.server, self.client = server, client
        self.out = out
        self.seed = seed
        self.apache = ApacheServer(out / "apache", server.ip, spec.port)
        self.httperf: Httperf | None = None  # an Ab (ApacheBench) for an IPv6 server
        self.summary: HttperfSummary | None = None
        self.pcap = out / "fg-client.pcap"
        self.tcpdump: Tcpdump | None = None

    def check(self) -> None:
        check_dependencies()

    def start_server(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        self.apache.start(self.server.place, [self.spec.object_bytes], self.seed)

    def wait_ready(self, timeout: float = 10.0) -> None:
        self.apache.wait_ready(self.client.place, timeout)
        # the client's own capture (headers only), started and listening before any request
        self.tcpdump = Tcpdump(self.client.place, tcpdump_argv(
            "any", self.pcap, 96, bpf=f"host {self.server.ip} and tcp port {self.spec.port}"),
            f"tcpdump at {self.client.ip}")
        self.tcpdump.start()

    def client_tool(self) -> type[Httperf]:
        """httperf, or ab (over IPv6, or asked for with ``client: ab``)."""
        ab = self.spec.client == "ab" or (self.spec.client == "auto" and is_v6(self.server.ip))
        return Ab if ab else Httperf

    def start_client(self) -> None:
        self.httperf = self.client_tool()(self.server.ip, self.spec.port, self.spec.object_bytes,
                              self.spec.objects or 10_000_000)
        self.httperf.start(self.client.place)

    def running(self) -> bool:
        return (self.httperf is not None and self.httperf.proc is not None
                and self.httperf.proc.poll() is None)

    def stop(self) -> None:
        """httperf first (its statistics), then Apache and the capture."""
        try:
            if self.httperf is not None and self.httperf.proc is not None:
                self.summary = self.httperf.stop()
        finally:
            self.apache.stop()
            if self.tcpdump is not None and self.tcpdump.proc is not None:
                counts = self.tcpdump.stop()
                if counts.dropped:
                    raise SwellError(self.pcap, f"capture dropped {counts.dropped} packets: "
                                                "response times would be incomplete")

    def collect(self, warmup_s: float = 0.0) -> GenResult:
        if self.summary is not None and self.summary.status_other:
            raise SwellError("httperf", f"{self.summary.status_other} replies were not 2xx "
                             f"(see {self.out / 'apache' / 'apache-error.log'})")
        summary: dict[str, Any] = {"server_ip": self.server.ip}
        if self.summary is not None:
            summary["httperf"] = self.summary
        return GenResult(self.name, {}, summary, {"client_pcap": self.pcap})


class HttperfKind(TrafficKind):
    """Response times of back-to-back object downloads (the study's foreground)."""

    name = "httperf"
    role = "foreground"
    Spec = HttperfSpec
    tools = (Tool("httperf", "httperf"), APACHE, Tool("tcpdump", "tcpdump"),
             Tool("ab", "apache2-utils"))  # ab: the client over IPv6
    testbed = True

    def build(self, ctx: RunContext) -> Generator:
        assert isinstance(self.spec, HttperfSpec)
        pl = ctx.placement
        if not pl.fg_servers or not pl.fg_clients:
            raise SwellError("httperf", "needs a foreground client and server in the topology")
        if self.spec.client == "httperf" and is_v6(pl.fg_servers[0].ip):
            raise SwellError("httperf", "client: httperf cannot reach an IPv6 server (it "
                                        "resolves IPv4 only); use client: ab or auto")
        return WebGenerator(self.spec, pl.fg_servers[0], pl.fg_clients[0], ctx.out_dir,
                            ctx.seed)

    def result(self, gen: GenResult | None, window: Window) -> KindResult:
        assert isinstance(self.spec, HttperfSpec)
        if gen is None:
            return KindResult(self.name)
        metrics = foreground_result(gen.files["client_pcap"], gen.summary["server_ip"],
                                    self.spec.port, window,
                                    gen.summary.get("httperf"), self.spec.object_bytes)
        return KindResult(self.name, metrics)
