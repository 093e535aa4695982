"""Testbed "machines" for integration tests: one sshd per network namespace.

Mininet's ``examples/sshd.py`` trick (DESIGN.md section 7): every machine is a
namespace from :class:`swell.nsset.NetnsSet` running its own
``/usr/sbin/sshd -D -o UseDNS=no -u0`` on its own management address; the
management network is a bridge in the root namespace (a host interface with
the set's prefix, so the set's cleanup removes it). Host keys, the client key,
``authorized_keys``, ``known_hosts``, each sshd's config and PidFile all live
in the test's temporary directory; nothing under ``/etc/ssh`` or ``~/.ssh`` is
read or written. The privilege separation directory ``/run/sshd`` is made if
missing and removed again afterwards. Experiment links are veths from each
machine's ``exp0`` to the router's ``r<N>`` (offloads off).

The machines share this host's file system, unlike real ones. To show that a
run needs nothing from the control machine but SSH, ``hide`` lists control
folders each sshd (and so everything started over ssh) sees covered by an empty
read-only tmpfs in its own mount namespace, and :meth:`Machines.hosts_file`
can give every machine its own work directory.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from swell.nsset import NetnsSet, ns_run, run_cmd
from swell.topologies.testbed import EmulatedHost

SSHD = "/usr/sbin/sshd"
REPO = Path(__file__).resolve().parents[2]
# the testbed tests' machines and their roles, and why they skip
MACHINES = ["rtr", "bgc0", "bgc1", "bgs0", "fgc0", "fgs0"]
ROLES = {"bgc0": "bg_clients", "bgc1": "bg_clients", "bgs0": "bg_servers",
         "fgc0": "fg_clients", "fgs0": "fg_servers"}
SKIPS = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, sshd)"),
    pytest.mark.skipif(not Path(SSHD).exists(), reason="openssh-server not installed"),
    pytest.mark.skipif(not (REPO / ".venv/bin/ansible-playbook").exists(),
                       reason="ansible-core not installed in .venv (requirements.lock)"),
]


def processes() -> list[tuple[str, bytes]]:
    """Every process's pid and command line (NUL-separated) that can be read."""
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                out.append((pid, Path(f"/proc/{pid}/cmdline").read_bytes()))
            except OSError:
                continue
    return out


TRAFFIC_PROGRAMS = {b"swell-gen", b"httperf", b"apache2", b"tcpdump"}
TRAFFIC_ARGS = (b"testbed_jobs", b"testbed\0host\0run", b"/run.yml")


def traffic_processes() -> list[str]:
    """Every process of a run's traffic (by its program, not a word in another command's
    arguments: a test name such as ``swing_and_httperf`` on this shared host is not
    httperf) or of its control, on any machine or here."""
    out = []
    for pid, cmd in processes():
        prog = cmd.split(b"\0", 1)[0].rsplit(b"/", 1)[-1]
        if prog == b"apache2" and b"\0-f\0" not in cmd:
            continue  # a system Apache, not the foreground's (its own configuration)
        if prog in TRAFFIC_PROGRAMS or any(w in cmd for w in TRAFFIC_ARGS):
            out.append(f"{pid}: {cmd.replace(bytes(1), b' ')[:100]!r}")
    return out


def free_mgmt_net() -> ipaddress.IPv4Network:
    """A /24 in 10.250-253.x.0 no route of the root namespace touches."""
    routes = run_cmd(["ip", "-4", "route", "show", "table", "all"]).stdout
    used = [ipaddress.IPv4Network(w, strict=False) for ln in routes.splitlines()
            for w in ln.split()[:1] if "/" in w]
    for _ in range(200):
        a, b = 250 + secrets.randbelow(4), secrets.randbelow(256)
        net = ipaddress.IPv4Network(f"10.{a}.{b}.0/24")
        if not any(net.overlaps(u) for u in used):
            return net
    raise RuntimeError("no free management /24")


@dataclass
class Machines:
    netns: NetnsSet
    tmp: Path
    names: list[str]
    ns: dict[str, str] = field(default_factory=dict)
    mgmt: dict[str, str] = field(default_factory=dict)
    procs: list[subprocess.Popen[Any]] = field(default_factory=list)
    made_privsep: bool = False

    @property
    def key(self) -> Path:
        return self.tmp / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.tmp / "known_hosts"

    def hosts_file(self, roles: dict[str, str], workdir: Path,
                   own_workdirs: Path | None = None, env: str | None = None) -> Path:
        """A hosts file for swell (router ``rtr``; ``roles``: machine -> role;
        ``own_workdirs``: every machine's work directory is its own folder in it;
        ``env``: ``VAR=value`` for swell on the machines)."""
        data = {
            "ssh": {"user": "root", "key": str(self.key), "known_hosts": str(self.known_hosts),
                    "strict_host_keys": False},
            "python": "/usr/bin/python3",
            "swell": f"{'env ' + env + ' ' if env else ''}{REPO}/.venv/bin/python -m "
                     "swell.experiments.testbed_cli",
            "workdir": str(workdir),
            "links_network": "172.30.0.0/16",
            "router": {"name": "rtr", "address": self.mgmt["rtr"]},
            "machines": [{"name": m, "address": self.mgmt[m], "iface": "exp0",
                          "router_iface": f"r{i}", "role": roles[m]}
                         for i, m in enumerate(self.names) if m != "rtr"],
        }
        if own_workdirs is not None:
            data["router"]["workdir"] = str(own_workdirs / "rtr")
            for entry in data["machines"]:
                entry["workdir"] = str(own_workdirs / entry["name"])
        path = self.tmp / "hosts.yml"
        path.write_text(yaml.safe_dump(data))
        return path

    def ssh(self, machine: str, *argv: str) -> subprocess.CompletedProcess[str]:
        return run_cmd(["ssh", "-i", str(self.key), "-o", "BatchMode=yes", "-o",
                        f"UserKnownHostsFile={self.known_hosts}", "-o",
                        "StrictHostKeyChecking=no", f"root@{self.mgmt[machine]}", *argv],
                       check=False, timeout=30)

    def stop(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if self.made_privsep:
            shutil.rmtree("/run/sshd", ignore_errors=True)


def start_machines(netns: NetnsSet, tmp: Path, names: list[str],
                   hide: tuple[Path, ...] = ()) -> Machines:
    """``names`` (one of them ``rtr``) as sshd namespaces on a management bridge;
    ``hide``: folders the machines see empty (see the module docstring)."""
    m = Machines(netns, tmp, names)
    net = free_mgmt_net()
    hosts = list(net.hosts())
    bridge = f"{netns.prefix}br"
    run_cmd(["ip", "link", "add", bridge, "type", "bridge"])
    run_cmd(["ip", "addr", "add", f"{hosts[0]}/24", "dev", bridge])
    run_cmd(["ip", "link", "set", bridge, "up"])
    run_cmd(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(m.key)])
    (tmp / "authorized_keys").write_text(Path(f"{m.key}.pub").read_text())
    run_cmd(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp / "host_key")])
    if not Path("/run/sshd").exists():
        os.makedirs("/run/sshd", mode=0o755)
        m.made_privsep = True
    for i, name in enumerate(names):
        ns = netns.add(name)
        m.ns[name] = ns
        addr = str(hosts[10 + i])
        m.mgmt[name] = addr
        host_end = f"{netns.prefix}m{i}"
        run_cmd(["ip", "link", "add", host_end, "type", "veth", "peer", "name", "mgmt0",
                 "netns", ns])
        run_cmd(["ip", "link", "set", host_end, "master", bridge, "up"])
        run_cmd(["ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", "mgmt0"])
        run_cmd(["ip", "-n", ns, "link", "set", "mgmt0", "up"])
        cfg = tmp / f"sshd-{name}.conf"
        cfg.write_text("\n".join([
            f"ListenAddress {addr}", f"HostKey {tmp / 'host_key'}",
            f"PidFile {tmp / f'sshd-{name}.pid'}",
            f"AuthorizedKeysFile {tmp / 'authorized_keys'}", "PermitRootLogin prohibit-password",
            "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no",
            "StrictModes no", "UseDNS no", "MaxStartups 100", "MaxSessions 100",
            "Subsystem sftp internal-sftp", ""]))
        sshd = [SSHD, "-D", "-e", "-u0", "-f", str(cfg)]
        if hide:
            mounts = " && ".join(f"mount -t tmpfs -o ro,size=64k swell-hidden {shlex.quote(str(h))}"
                                 for h in hide)
            sshd = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                    f"{mounts} && exec {shlex.join(sshd)}"]
        m.procs.append(netns.popen(ns, sshd, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL))
    for i, name in enumerate(names):
        if name != "rtr":
            netns.veth(m.ns[name], "exp0", m.ns["rtr"], f"r{i}")
    deadline = time.monotonic() + 10
    for name in names:
        while m.ssh(name, "true").returncode != 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"sshd of {name} not reachable")
            time.sleep(0.1)
    return m


def plan_of(tdir: Path) -> SimpleNamespace:
    """The testbed plan a rendered directory holds (``testbed.json``), as attributes."""
    data = json.loads((tdir / "testbed.json").read_text())["plan"]
    return SimpleNamespace(prefix=data["prefix"], spec=data["spec"],
                           hosts=[EmulatedHost(**h) for h in data["hosts"]],
                           edges=[SimpleNamespace(**e) for e in data["edges"]],
                           ports=[SimpleNamespace(**p) for p in data["ports"]])


def exp_devs(m: Machines, name: str) -> list[str]:
    """A machine's experiment interfaces: ``exp0``, or the router's ``r<N>``."""
    return [f"r{j}" for j, n in enumerate(m.names) if n != "rtr"] if name == "rtr" else ["exp0"]


def kernel_state(m: Machines) -> dict[str, str]:
    """What layout changes and teardown must restore: every experiment interface's
    offloads (machines' ``exp0``, the router's ``r<N>``), the router's forwarding and
    reverse-path filters, the edge machines' TCP congestion control."""
    out = {}
    for name in m.names:
        ns, devs = m.ns[name], exp_devs(m, name)
        for dev in devs:
            text = ns_run(ns, "ethtool", "-k", dev).stdout
            for feat in ("tcp-segmentation-offload", "generic-segmentation-offload",
                         "generic-receive-offload"):
                out[f"{name} {dev} {feat}"] = re.search(rf"^{feat}: (\S+)", text, re.M).group(1)
        keys = ["net.ipv4.ip_forward", "net.ipv4.conf.all.rp_filter",
                *(f"net.ipv4.conf.{d}.rp_filter" for d in devs)] if name == "rtr" \
            else ["net.ipv4.tcp_congestion_control"]
        for key in keys:
            out[f"{name} {key}"] = ns_run(ns, "sysctl", "-n", key).stdout.strip()
    return out


def unlike_a_testbed(m: Machines) -> None:
    """Set what layout must change to values it changes (and teardown must restore):
    offloads on, forwarding off and strict reverse-path filtering on the router."""
    for name in m.names:
        for dev in exp_devs(m, name):
            ns_run(m.ns[name], "ethtool", "-K", dev, "tso", "on", "gso", "on", "gro", "on")
    ns_run(m.ns["rtr"], "sysctl", "-qw", "net.ipv4.ip_forward=0",
           "net.ipv4.conf.all.rp_filter=1", *(f"net.ipv4.conf.r{j}.rp_filter=1"
                                               for j, n in enumerate(m.names) if n != "rtr"))


def ssh_files() -> dict[str, str]:
    """Every file under ``~/.ssh`` and ``/etc/ssh`` with a digest of its contents and mode:
    the testbed machines and Ansible must leave them as they are."""
    out = {}
    for top in (Path.home() / ".ssh", Path("/etc/ssh")):
        for f in sorted(top.rglob("*")) if top.exists() else []:
            if f.is_file():
                out[str(f)] = f"{f.stat().st_mode:o} " + hashlib.sha256(f.read_bytes()).hexdigest()
        out[str(top)] = "present" if top.exists() else "absent"
    return out


def leftovers(m: Machines, prefix: str, workdirs: list[Path], plan: Any) -> list[str]:
    """Everything with the run's prefix still on any machine, and anything in a
    machine's work directory (Ansible's own files included)."""
    left = [f"netns {n}" for n in os.listdir("/run/netns") if n.startswith(prefix)]
    aliases = {h.ip for h in plan.hosts} | {e.link_ip.split("/")[0] for e in plan.edges} | \
        {p.ip.split("/")[0] for p in plan.ports}
    for name, ns in m.ns.items():
        links = subprocess.run(["ip", "-n", ns, "-o", "link"], capture_output=True,
                               text=True).stdout
        left += [f"{name}: link {w}" for w in re.findall(r"\d+: ([^:@]+)", links)
                 if w.startswith(prefix)]
        addrs = subprocess.run(["ip", "-n", ns, "-o", "-4", "addr"], capture_output=True,
                               text=True).stdout
        left += [f"{name}: address {a}" for a in re.findall(r"inet ([\d.]+)/", addrs)
                 if a in aliases]
        rules = subprocess.run(["ip", "-n", ns, "rule"], capture_output=True, text=True).stdout
        left += [f"{name}: rule {r}" for r in rules.splitlines() if r.startswith("77")]
        routes = subprocess.run(["ip", "-n", ns, "route", "show", "table", "all"],
                                capture_output=True, text=True).stdout
        left += [f"{name}: route {r}" for r in routes.splitlines()
                 if r.startswith("10.78.") or "table 770" in r]
    for pid, cmd in processes():
        if prefix.encode() in cmd and b"pytest" not in cmd:
            shown = cmd.replace(b"\0", b" ")[:80]
            left.append(f"process {pid}: {shown!r}")
    left += [f"files: {f}" for w in workdirs if w.exists() for f in w.iterdir()]
    return left
