"""A set of network namespaces owned by one test or one benchmark run.

Integration tests and benchmarks build small networks out of named network
namespaces joined by veth pairs. This module is the one place that does it, so
that every such network is made, and unmade, the same way:

* **One prefix per set.** A :class:`NetnsSet` picks ``<tag><4 hex>`` (``swt``
  for tests, a bench chooses its own, e.g. ``swb``) that no namespace or host
  interface uses yet; every namespace it makes is ``<prefix>-<name>``. Cleanup
  and the leak check then touch only names with that prefix, never anything by
  a broad pattern (the Mininet ``mn -c`` problem, STYLE.md).
* **Wire-sized packets.** :meth:`NetnsSet.veth` turns off TSO, GSO and GRO on
  both ends (DESIGN.md section 3: otherwise 64 KB "packets" reach emulators and
  captures); a caller may add more features (the link bench also turns off TX
  checksum offload). A failing ``ethtool`` is an error, not a warning. The
  pair is created with each end directly in its namespace, so no temporary
  interface ever appears in the host namespace.
* **Cleanup that finishes.** :meth:`NetnsSet.cleanup` SIGKILLs every process
  whose network namespace is one of the set's (never this process), waits for
  them to leave, deletes the namespaces (their veth ends go with them) and any
  host interface carrying the prefix. :meth:`NetnsSet.leftovers` lists what is
  still there, for a test to assert on. The set is a context manager.

Namespace-level helpers (:func:`ns_run`, :func:`ns_popen`, :func:`ns_path`,
:func:`ns_pids`) are plain functions, usable with a namespace name alone; the
set's methods of the same purpose call them. This module imports nothing from
``swell.topologies``, ``swell.generators`` or ``swell.experiments``: it is
test and bench plumbing, below the pipeline.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import subprocess
import time
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import Any

NETNS_DIR = "/var/run/netns"
SYS_NET = "/sys/class/net"
DEFAULT_OFFLOADS_OFF: tuple[str, ...] = ("tso", "gso", "gro")
"""``ethtool -K`` features turned off on both ends of every veth."""

_TAG = re.compile(r"[a-z][a-z0-9]{0,7}")


class NsCommandError(subprocess.CalledProcessError):
    """A command in a namespace failed; unlike its base class, says why (stderr)."""

    def __str__(self) -> str:
        err = (self.stderr or "").strip() if isinstance(self.stderr, str) else ""
        return f"{super().__str__()}: {err}" if err else super().__str__()


def ns_path(ns: str) -> str:
    """The bind-mounted namespace file (what ``setns`` and the link engine open)."""
    return f"{NETNS_DIR}/{ns}"


def ns_argv(ns: str, argv: Sequence[str]) -> list[str]:
    """``argv`` prefixed to run inside namespace ``ns``."""
    return ["ip", "netns", "exec", ns, *argv]


def run_cmd(argv: Sequence[str], *, check: bool = True, input: str | None = None,
            timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` with text output captured; ``check`` raises :class:`NsCommandError`."""
    proc = subprocess.run(list(argv), capture_output=True, text=True, input=input,
                          timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise NsCommandError(proc.returncode, proc.args, proc.stdout, proc.stderr)
    return proc


def ns_run(ns: str, *argv: str, check: bool = True, input: str | None = None,
           timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """Run a command inside ``ns`` and wait for it (text output captured)."""
    return run_cmd(ns_argv(ns, argv), check=check, input=input, timeout=timeout)


def ns_popen(ns: str, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """Start a command inside ``ns``; ``kwargs`` go to :class:`subprocess.Popen`."""
    return subprocess.Popen(ns_argv(ns, argv), **kwargs)


def ns_pids(ns: str) -> list[int]:
    """Processes whose network namespace is ``ns`` (as ``ip netns pids``, without a fork)."""
    try:
        target = os.stat(ns_path(ns))
    except OSError:
        return []
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            st = os.stat(f"/proc/{entry.name}/ns/net")
        except OSError:  # gone, a zombie, or a kernel thread
            continue
        if (st.st_dev, st.st_ino) == (target.st_dev, target.st_ino):
            found.append(int(entry.name))
    return found


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


class NetnsSet:
    """Namespaces (and the veths between them) owned by one test or bench run.

    ``tag`` starts the prefix (lowercase letters and digits, at most 8); the
    prefix is the tag and four random hex digits that no namespace or host
    interface uses yet. Needs root for everything but construction.
    """

    def __init__(self, tag: str = "swt") -> None:
        if not _TAG.fullmatch(tag):
            raise ValueError(f"namespace set tag {tag!r}: want [a-z][a-z0-9]{{0,7}}")
        taken = _listdir(NETNS_DIR) + _listdir(SYS_NET)
        for _ in range(100):
            prefix = tag + secrets.token_hex(2)
            if not any(name.startswith(prefix) for name in taken):
                break
        else:
            raise RuntimeError(f"no free namespace prefix for tag {tag!r}")
        self.prefix: str = prefix
        self.names: list[str] = []

    def __repr__(self) -> str:
        return f"NetnsSet({self.prefix!r}, names={self.names!r})"

    def __enter__(self) -> NetnsSet:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.cleanup()

    # --- building --------------------------------------------------------

    def add(self, name: str, *, sysctls: Iterable[str] = ()) -> str:
        """Make namespace ``<prefix>-<name>`` with ``lo`` up; return its full name.

        ``sysctls`` (``"key=value"``) are set before ``lo`` comes up, e.g.
        ``net.ipv6.conf.all.disable_ipv6=1`` or per-namespace TCP buffers.
        """
        full = f"{self.prefix}-{name}"
        run_cmd(["ip", "netns", "add", full])
        self.names.append(full)
        settings = list(sysctls)
        if settings:
            self.sysctl(full, *settings)
        run_cmd(["ip", "-n", full, "link", "set", "lo", "up"])
        return full

    def veth(self, ns_a: str, if_a: str, ns_b: str, if_b: str, *,
             offloads_off: Sequence[str] = DEFAULT_OFFLOADS_OFF) -> None:
        """A veth pair ``ns_a:if_a`` -- ``ns_b:if_b``, both ends up, ``offloads_off`` off.

        Each end is created directly in its namespace (nothing passes through
        the host namespace). ``offloads_off`` are ``ethtool -K`` feature names;
        pass ``(*DEFAULT_OFFLOADS_OFF, "tx")`` to turn TX checksumming off too.
        """
        run_cmd(["ip", "link", "add", if_a, "netns", ns_a, "type", "veth",
                 "peer", "name", if_b, "netns", ns_b])
        for ns, ifname in ((ns_a, if_a), (ns_b, if_b)):
            if offloads_off:
                ns_run(ns, "ethtool", "-K", ifname, *(x for f in offloads_off for x in (f, "off")))
            run_cmd(["ip", "-n", ns, "link", "set", ifname, "up"])

    def sysctl(self, ns: str, *settings: str) -> None:
        """Set ``key=value`` sysctls inside ``ns`` (one ``sysctl -qw`` for all)."""
        ns_run(ns, "sysctl", "-qw", *settings)

    def ip_batch(self, ns: str, lines: Iterable[str]) -> None:
        """Run ``ip -batch`` lines (``"address add ..."``, ``"route add ..."``) in ``ns``."""
        text = "".join(f"{ln}\n" for ln in lines)
        if text:
            run_cmd(["ip", "-n", ns, "-batch", "-"], input=text)

    def add_addresses(self, ns: str, dev: str, cidrs: Iterable[str]) -> None:
        """Put every ``cidrs`` address (``10.1.0.1/16``) on ``dev`` in ``ns`` (one batch)."""
        self.ip_batch(ns, (f"address add {c} dev {dev}" for c in cidrs))

    def add_route(self, ns: str, dest: str, via: str, dev: str | None = None) -> None:
        """``ip route add dest via via [dev dev]`` in ``ns``; ``dest`` may be ``default``."""
        run_cmd(["ip", "-n", ns, "route", "add", dest, "via", via,
                 *(("dev", dev) if dev else ())])

    # --- using -----------------------------------------------------------

    def run(self, ns: str, *argv: str, check: bool = True, input: str | None = None,
            timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        """Run a command inside ``ns`` and wait (see :func:`ns_run`)."""
        return ns_run(ns, *argv, check=check, input=input, timeout=timeout)

    def popen(self, ns: str, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Start a command inside ``ns`` (see :func:`ns_popen`); cleanup kills it."""
        return ns_popen(ns, argv, **kwargs)

    def mac(self, ns: str, ifname: str) -> str:
        """The MAC address of ``ifname`` in ``ns``."""
        out = run_cmd(["ip", "-n", ns, "-j", "link", "show", ifname]).stdout
        return str(json.loads(out)[0]["address"])

    def pids(self) -> list[int]:
        """Processes in any of the set's namespaces."""
        return sorted({pid for ns in self._namespaces() for pid in ns_pids(ns)})

    # --- unmaking --------------------------------------------------------

    def cleanup(self, wait_s: float = 5.0) -> None:
        """Kill the set's processes, delete its namespaces and prefixed host interfaces.

        Safe to call twice and after a partial build; failures to delete are
        not raised here but show in :meth:`leftovers`.
        """
        namespaces = self._namespaces()
        deadline = time.monotonic() + wait_s
        while True:
            pids = [p for ns in namespaces for p in ns_pids(ns) if p != os.getpid()]
            if not pids or time.monotonic() > deadline:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)
        for ns in namespaces:
            run_cmd(["ip", "netns", "del", ns], check=False)
        for ifname in self._host_links():
            run_cmd(["ip", "link", "del", ifname], check=False)
        self.names.clear()

    def leftovers(self) -> list[str]:
        """Namespaces and host interfaces that still carry the prefix (empty: clean)."""
        return ([f"netns {ns}" for ns in self._namespaces(listed_only=True)]
                + [f"link {name}" for name in self._host_links()])

    def _namespaces(self, listed_only: bool = False) -> list[str]:
        listed = sorted(n for n in _listdir(NETNS_DIR) if n.startswith(self.prefix))
        if listed_only:
            return listed
        return list(dict.fromkeys([*self.names, *listed]))

    def _host_links(self) -> list[str]:
        out = run_cmd(["ip", "-j", "link", "show"], check=False).stdout
        try:
            links = json.loads(out) if out.strip() else []
        except json.JSONDecodeError:
            links = []
        return [ln["ifname"] for ln in links if str(ln.get("ifname", "")).startswith(self.prefix)]
