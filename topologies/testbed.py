"""A dumbbell on real machines: the hosts file, the testbed plan and its inventory.

The mapping is ModelNet's: the emulated hosts of a run are address aliases on
*edge machines*, and one *router* machine (the emulator core) forwards between
them and shapes every emulated host's access link and the bottleneck. Edge
machines need no shaping.

Wiring, as on an Emulab/CloudLab allocation: every edge machine has one
experiment interface, a point-to-point link to the router. swell gives each
link a ``/30`` from ``links_network`` (aliases: addresses the testbed already
put there stay), puts the machine's emulated hosts on it as ``/32`` aliases
and routes the experiment's network via the router. On the router the kernel
forwards, but never directly between the two sides: a policy rule per
incoming link sends every packet into the emulator core, a namespace
``<prefix>-core`` joined to the router by two veths (one per side), and the
packet is shaped by the source host's access link, the bottleneck in that
direction and the destination host's access link before the main table routes
it to the destination machine. Two engines, as locally (``router_engine``,
chosen on the router by ``swell testbed host up``; ``auto`` takes netem where
the router's kernel has ``sch_netem`` and ``sch_htb``):

* **netem**: the core forwards with the kernel and tc shapes at three egress
  points per direction (:func:`netem_batches`, :mod:`swell.topologies.netem`'s
  htb/netem forms): the router's veth into the core (source host, by source
  address), the core's veth out (the bottleneck) and the router's port to the
  destination machine (destination host, by destination address); one
  ``tcpdump`` per direction on the core's egress captures the bottleneck;
* **native**: ``swell-link`` (:mod:`swell.topologies.linkemu`) on the core's
  two ports applies the three links and writes the bottleneck captures itself;
  the local dumbbell uses the same engine configuration
  (:func:`swell.topologies.engines.native_config`); only the ports differ.

Captures are written on the router: the ``capture`` group is the router.

This module is pure: :func:`plan_testbed` turns a topology spec (the one the
local run would use, access links drawn from the model with the run's seed)
and a :class:`HostsFile` into a :class:`TestbedPlan`; :func:`write_inventory`
writes the Ansible inventory, per-host variables and ``ansible.cfg``. The
commands that act on one machine are in :mod:`swell.topologies.testbed_host`
(lay out, tear down, facts) and :mod:`swell.topologies.testbed_exec` (its part
of the traffic); the control machine reaches the machines only through
Ansible.
"""

from __future__ import annotations

import ipaddress
import platform
import shlex
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from swell.errors import SwellError
from swell.fsutil import write_json, write_text
from swell.topologies.addressing import NodePlan, plan_addresses
from swell.topologies.quickack import quickack_hosts
from swell.topologies.spec import LinkDir, TopologySpec, format_validation_error
from swell.typed import StrictModel

ROLES = ("bg_clients", "bg_servers", "fg_clients", "fg_servers")
GROUPS = ("router", *ROLES, "capture")
Role = Literal["bg_clients", "bg_servers", "fg_clients", "fg_servers"]
RULE_PREF = 7700  # policy rules: RULE_PREF + link index (only swell's own)
TABLES = {"left": 7701, "right": 7702}


class Ssh(StrictModel):
    user: str = "root"
    port: int = Field(22, ge=1, le=65535)
    key: str | None = None  # private key file on the control machine
    known_hosts: str | None = None  # None: the user's own (testbeds: pass a file)
    strict_host_keys: bool = True
    become: bool = False  # log in as ``user`` and act as root with sudo (Emulab, CloudLab)


# an interface by name, or by MAC address (found on the machine when it is laid out)
IFACE = r"^([^\s/:]{1,15}|[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5})$"


class Machine(StrictModel):
    name: str = Field(..., pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")
    address: str  # how the control machine reaches it (management network)
    iface: str = Field(..., pattern=IFACE)  # its experiment interface
    router_iface: str = Field(..., pattern=IFACE)  # the router's end
    role: Role
    workdir: str | None = None  # this machine's own work directory (default: the file's)
    port: int | None = Field(None, ge=1, le=65535)  # its own ssh port (default: ssh.port)


class RouterHost(StrictModel):
    name: str = Field("router0", pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")
    address: str
    workdir: str | None = None
    port: int | None = Field(None, ge=1, le=65535)  # its own ssh port (default: ssh.port)


class HostsFile(StrictModel):
    """``HOSTS.yml``: the machines of an allocation and how to reach them."""

    ssh: Ssh = Ssh()
    python: str = "/usr/bin/python3"
    swell: str = "swell"  # the command that runs swell on every machine
    # the virtualenv prepare installs swell into when a machine's differs from the
    # control machine's (default: the one the swell command is in, when it names one)
    swell_venv: str | None = None
    workdir: str = "/var/tmp/swell-testbed"  # swell's files on the machines
    links_network: ipaddress.IPv4Network = ipaddress.IPv4Network("172.30.0.0/16")
    # the router's shaping: netem/htb where its kernel has them (auto), or swell-link
    router_engine: Literal["auto", "netem", "native"] = "auto"
    # how prepare installs the native programs a machine lacks: copy the control
    # machine's build (same architecture), build on the machine from the control
    # machine's source with vendored crates, or copy where it can and build elsewhere
    native: Literal["auto", "copy", "build"] = "auto"
    router: RouterHost
    machines: tuple[Machine, ...]

    @model_validator(mode="after")
    def _check(self) -> HostsFile:
        names = [self.router.name, *(m.name for m in self.machines)]
        if len(set(names)) != len(names):
            raise ValueError("machine names must be unique (the router's too)")
        rifs = [m.router_iface for m in self.machines]
        if len(set(rifs)) != len(rifs):
            raise ValueError("two machines use the same router interface")
        for role in ("bg_clients", "bg_servers"):
            if not any(m.role == role for m in self.machines):
                raise ValueError(f"no machine has role {role}")
        if self.links_network.prefixlen > 24:
            raise ValueError("links_network must be at least a /24")
        return self

    def venv(self) -> str | None:
        """Where ``prepare`` installs swell on the machines (None: it cannot)."""
        if self.swell_venv:
            return self.swell_venv
        words = shlex.split(self.swell)
        if words and words[0] in ("env", "/usr/bin/env"):  # env VAR=... swell ...
            words = [w for w in words[1:] if "=" not in w]
        path = PurePosixPath(words[0]) if words else PurePosixPath()
        if path.is_absolute() and path.parent.name == "bin":
            return str(path.parent.parent)
        return None

    def by_role(self, role: str) -> list[Machine]:
        return [m for m in self.machines if m.role == role]

    def workdir_of(self, name: str) -> str:
        """The work directory of machine ``name`` (its own, else the file's)."""
        for m in (self.router, *self.machines):
            if m.name == name:
                return m.workdir or self.workdir
        raise SwellError("hosts", f"no machine {name!r}")

    def state_of(self, name: str, prefix: str) -> str:
        """Everything swell keeps on machine ``name`` for run ``prefix``."""
        return f"{self.workdir_of(name)}/{prefix}/{name}"


def load_hosts(path: str | Path) -> HostsFile:
    """Read and validate a hosts file (one-line errors naming it)."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise SwellError(p, f"cannot read: {exc}") from None
    try:
        return HostsFile.model_validate(data)
    except ValidationError as exc:
        raise SwellError(p, format_validation_error(exc)) from None


@dataclass(frozen=True)
class EmulatedHost:
    ip: str
    side: str  # left (clients) or right (servers)
    role: str  # bg or fg
    machine: str
    link: dict[str, Any] | None  # LinkDir as data (None: unconstrained)


@dataclass(frozen=True)
class EdgeVars:
    """What one edge machine needs to lay itself out (its host_vars)."""

    name: str
    role: str
    side: str
    iface: str
    link_ip: str  # its end of the /30, with prefix length
    router_ip: str  # the router's end (no prefix length)
    subnets: tuple[str, ...]  # the emulated subnets it carries
    aliases: tuple[str, ...]  # its emulated hosts
    network: str  # the experiment's emulated network, routed via the router
    congestion_control: str | None = None  # the experiment's, set machine-wide (undone after)
    # its aliases that ACK every segment on one port: (alias, "dport"|"sport", port)
    quickack: tuple[tuple[str, str, int], ...] = ()


@dataclass(frozen=True)
class RouterPort:
    machine: str
    side: str
    ifname: str
    ip: str  # router end, with prefix length
    peer_ip: str
    subnets: tuple[str, ...]


@dataclass(frozen=True)
class TestbedPlan:
    """Everything a testbed run needs, as plain data (``testbed.json``)."""

    prefix: str
    spec: dict[str, Any]  # the topology spec, as data
    edges: tuple[EdgeVars, ...]
    ports: tuple[RouterPort, ...]
    core: dict[str, Any]  # core namespace, veths, transit addresses, MACs
    hosts: tuple[EmulatedHost, ...]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _node_machines(plan_nodes: Sequence[NodePlan], hosts: HostsFile) -> dict[str, Machine]:
    """Which machine carries each address-plan node (round robin within a role)."""
    role_of = {("left", "bg"): "bg_clients", ("right", "bg"): "bg_servers",
               ("left", "fg"): "fg_clients", ("right", "fg"): "fg_servers"}
    out: dict[str, Machine] = {}
    counters: dict[str, int] = {}
    for node in plan_nodes:
        role = role_of[(node.side, node.role)]
        machines = hosts.by_role(role)
        if not machines:
            raise SwellError("hosts", f"the experiment needs a machine with role {role}")
        k = counters.get(role, 0)
        counters[role] = k + 1
        out[node.suffix] = machines[k % len(machines)]
    return out


def plan_testbed(spec: TopologySpec, links: dict[str, list[tuple[Any, LinkDir]]],
                 hosts: HostsFile, prefix: str,
                 congestion_control: str | None = None) -> TestbedPlan:
    """The testbed layout of a run (``links``: resolved access links per side)."""
    nets = list(hosts.links_network.subnets(new_prefix=30))
    if hosts.links_network.overlaps(spec.network):
        raise SwellError("hosts", f"links_network {hosts.links_network} overlaps the "
                         f"experiment's network {spec.network}")
    if len(nets) < len(hosts.machines) + 2:
        raise SwellError("hosts", f"links_network {hosts.links_network} is too small")
    plan = plan_addresses(spec)
    where = _node_machines(plan.nodes, hosts)
    link_of = {str(ip): link for side in links.values() for ip, link in side}
    quick: dict[str, list[tuple[str, str, int]]] = {}
    for node, h, match, port in quickack_hosts(spec, plan):
        quick.setdefault(where[node.suffix].name, []).append((str(h), match, port))
    edges, ports, emulated = [], [], []
    for i, m in enumerate(hosts.machines):
        nodes = [n for n in plan.nodes if where[n.suffix].name == m.name]
        side = "left" if m.role in ("bg_clients", "fg_clients") else "right"
        net = nets[i]
        r_ip, m_ip = net.network_address + 1, net.network_address + 2
        subnets = tuple(str(n.subnet) for n in nodes)
        aliases = tuple(str(h) for n in nodes for h in n.hosts)
        edges.append(EdgeVars(m.name, m.role, side, m.iface, f"{m_ip}/30", str(r_ip), subnets,
                              aliases, str(spec.network), congestion_control,
                              tuple(quick.get(m.name, ()))))
        ports.append(RouterPort(m.name, side, m.router_iface, f"{r_ip}/30", str(m_ip), subnets))
        for n in nodes:
            for h in n.hosts:
                link = link_of.get(str(h))
                data = None if link is None else link.model_dump(mode="json")
                emulated.append(EmulatedHost(str(h), n.side, n.role, m.name, data))
    left_t, right_t = nets[-1], nets[-2]
    core = {
        "netns": f"{prefix}-core",
        "left": {"router_if": f"{prefix}l", "core_if": "cl", "router_ip":
                 f"{left_t.network_address + 1}/30", "gateway": str(left_t.network_address + 2),
                 "router_mac": "02:5e:00:00:01:01", "core_mac": "02:5e:00:00:01:02"},
        "right": {"router_if": f"{prefix}r", "core_if": "cr", "router_ip":
                  f"{right_t.network_address + 1}/30", "gateway":
                  str(right_t.network_address + 2),
                  "router_mac": "02:5e:00:00:02:01", "core_mac": "02:5e:00:00:02:02"},
        "halves": {side: str(net) for side, net in plan.halves.items()},
    }
    return TestbedPlan(prefix, spec.model_dump(mode="json"), tuple(edges), tuple(ports), core,
                       tuple(emulated))


def engine_config(plan: TestbedPlan, state: str) -> dict[str, Any]:
    """The swell-link configuration of the router (JSON data; paths on the router)."""
    from swell.topologies import linkemu
    from swell.topologies.spec import spec_from_dict

    spec = spec_from_dict(plan.spec, "testbed spec")
    core = plan.core
    ports = tuple(
        linkemu.PortSpec(name=side, netns=f"/run/netns/{core['netns']}",
                         ifname=core[side]["core_if"], peer_mac=core[side]["router_mac"],
                         gateway_ips=(core[side]["gateway"],))
        for side in ("left", "right"))
    routes = tuple(linkemu.Route(prefix=core["halves"][side], port=side)
                   for side in ("left", "right"))
    host_links = []
    for h in plan.hosts:
        if h.link is not None:
            pipe = linkemu.pipe_from_link(LinkDir.model_validate(h.link))
            host_links.append(linkemu.HostLink(ip=h.ip, up=pipe, down=pipe))
    fwd, rev = spec.bottleneck.forward_dir(), spec.bottleneck.reverse_dir()
    port_pipes = (("left", "right", linkemu.pipe_from_link(fwd)),
                  ("right", "left", linkemu.pipe_from_link(rev)))
    captures: tuple[tuple[str, str, str], ...] = ()
    if spec.capture.enabled:
        captures = (("left", "right", f"{state}/capture/bottleneck-forward.pcap"),
                    ("right", "left", f"{state}/capture/bottleneck-reverse.pcap"))
    return linkemu.EngineConfig(name=plan.prefix, ports=ports, routes=routes,
                                hosts=tuple(host_links), port_pipes=port_pipes,
                                captures=captures, stats_path=f"{state}/link-stats.jsonl",
                                seed=spec.seed).to_json()


def pairs_packets(plan: TestbedPlan) -> bool:
    """Whether a link of the run has ``pairing`` (the router must run swell-link)."""
    from swell.topologies.spec import any_pairing, spec_from_dict

    return any_pairing(spec_from_dict(plan.spec, "testbed spec").bottleneck, (
        LinkDir.model_validate(h.link) for h in plan.hosts if h.link is not None))


def netem_batches(plan: TestbedPlan, mtu: int = 1500) -> dict[str, list[list[str]]]:
    """The router's tc commands when it shapes with netem/htb (:mod:`.netem`'s forms).

    The packet's path through the router gives three egress points per direction,
    as in the local dumbbell: the router's veth into the core (the source host's
    access link, classified by source address), the core's veth out (the
    bottleneck in that direction) and the router's port to the destination
    machine (the destination host's access link, by destination address).
    ``router``: commands in the router's namespace; ``core``: in the core's.
    """
    from swell.topologies import netem
    from swell.topologies.spec import spec_from_dict

    spec = spec_from_dict(plan.spec, "testbed spec")
    core = plan.core
    halves = {side: ipaddress.ip_network(net) for side, net in core["halves"].items()}
    shaped = [(h, LinkDir.model_validate(h.link)) for h in plan.hosts if h.link is not None]
    out: dict[str, list[list[str]]] = {"router": [], "core": []}
    out["core"] += netem.bottleneck_cmds(core["right"]["core_if"],
                                         spec.bottleneck.forward_dir(), mtu)
    out["core"] += netem.bottleneck_cmds(core["left"]["core_if"],
                                         spec.bottleneck.reverse_dir(), mtu)
    for side in ("left", "right"):
        pairs = [(ipaddress.ip_address(h.ip), link) for h, link in shaped if h.side == side]
        if pairs:
            out["router"] += netem.access_cmds(core[side]["router_if"], pairs, "src",
                                               halves[side], mtu)  # type: ignore[arg-type]
    for port in plan.ports:
        pairs = [(ipaddress.ip_address(h.ip), link) for h, link in shaped
                 if h.machine == port.machine]
        if pairs:
            out["router"] += netem.access_cmds(port.ifname, pairs, "dst",
                                               halves[port.side], mtu)  # type: ignore[arg-type]
    return out


def host_vars(plan: TestbedPlan, hosts: HostsFile) -> dict[str, dict[str, Any]]:
    """Per-machine variables: ``swell_host`` is what ``swell testbed host plan`` reads, its
    ``steps`` the machine's layout as commands (:mod:`swell.topologies.testbed_steps`)."""
    from swell.topologies.testbed_steps import edge_steps, router_steps

    out: dict[str, dict[str, Any]] = {}

    def common(name: str) -> dict[str, Any]:
        state = hosts.state_of(name, plan.prefix)
        work = f"{hosts.workdir_of(name)}/{plan.prefix}"
        # Ansible's own files on the machine (asynchronous tasks' status, modules and
        # files in transit) stay in the run's work directory, which teardown removes
        host = hosts.router if name == hosts.router.name else \
            next(m for m in hosts.machines if m.name == name)
        port = {"ansible_port": host.port} if host.port else {}  # else the common one
        return {"ansible_host": host.address, **port,
                "swell_state": state, "swell_workdir": work,
                "ansible_async_dir": f"{state}/.async",
                "ansible_remote_tmp": f"{work}/.ansible-tmp"}

    for m, edge in zip(hosts.machines, plan.edges, strict=True):
        hv = common(m.name)
        v = {"kind": "edge", "prefix": plan.prefix, "state": hv["swell_state"], **asdict(edge)}
        out[m.name] = {**hv, "swell_host": {**v, "steps": edge_steps(v)}}
    hv = common(hosts.router.name)
    state = hv["swell_state"]
    choice, netem_cmds = hosts.router_engine, None
    if pairs_packets(plan):  # only swell-link delivers a packet with the one before
        if choice == "netem":
            raise SwellError("router_engine", "netem asked for, but the spec's links pair "
                             "packets (pairing), which only swell-link emulates")
        choice = "native"
    else:
        netem_cmds = netem_batches(plan)
    v = {"kind": "router", "prefix": plan.prefix, "state": state,
         "ports": [asdict(p) for p in plan.ports], "core": plan.core,
         "rule_pref": RULE_PREF, "tables": TABLES, "engine_choice": choice,
         "engine": engine_config(plan, state), "netem": netem_cmds,
         "capture": plan.spec.get("capture", {"enabled": True, "snaplen": 128})}
    out[hosts.router.name] = {**hv, "swell_host": {**v, "steps": router_steps(v)}}
    return out


def control_source() -> str | None:
    """The swell checkout this control machine runs (None: not run from a checkout)."""
    root = Path(__file__).resolve().parent.parent
    return str(root) if (root / "pyproject.toml").is_file() else None


def inventory(plan: TestbedPlan, hosts: HostsFile, out: Path | None = None) -> dict[str, Any]:
    """The Ansible inventory: the groups, and what every host shares (``out``: the
    rendered directory, where prepare builds swell's wheel when a machine needs it)."""
    from swell.native import native_dir
    from swell.topologies.testbed_host import source_digest

    ssh = hosts.ssh
    common: dict[str, Any] = {
        "ansible_user": ssh.user, "ansible_port": ssh.port,
        "ansible_python_interpreter": hosts.python,
        "swell_cmd": hosts.swell, "swell_prefix": plan.prefix,
        "swell_venv": hosts.venv(), "swell_source": control_source(),
        "swell_digest": source_digest(),
        "swell_render_dir": str(out.resolve()) if out is not None else None,
        # the native programs prepare installs where a machine lacks them: the control
        # machine's build, for machines of its architecture
        "swell_native_local": str(native_dir().resolve()), "swell_control_arch":
        platform.machine(), "swell_router_engine": hosts.router_engine,
        "swell_native_mode": hosts.native,
    }
    if ssh.key:
        common["ansible_ssh_private_key_file"] = ssh.key
    if ssh.become:
        common["ansible_become"] = True
    groups: dict[str, Any] = {g: {"hosts": {}} for g in GROUPS}
    groups["router"]["hosts"][hosts.router.name] = None
    groups["capture"]["hosts"][hosts.router.name] = None
    for m in hosts.machines:
        groups[m.role]["hosts"][m.name] = None
    return {"all": {"vars": common, "children": groups}}


def ansible_cfg(hosts: HostsFile, out: Path) -> str:
    """``ansible.cfg`` for the rendered directory: nothing lands in the user's home."""
    ssh = hosts.ssh
    # no ControlMaster: no ssh process outlives a playbook (and no socket path limit)
    args = ["-o ControlMaster=no", "-o IdentitiesOnly=yes",
            "-o BatchMode=yes", "-o ConnectTimeout=10"]
    if ssh.known_hosts:
        args.append(f"-o UserKnownHostsFile={ssh.known_hosts}")
    if not ssh.strict_host_keys:
        args.append("-o StrictHostKeyChecking=no")
    roles = Path(__file__).resolve().parent.parent / "ansible" / "roles"
    return "\n".join([
        "[defaults]", f"inventory = {out.resolve()}/inventory.yml",
        f"roles_path = {roles}", f"callback_plugins = {roles.parent / 'callback_plugins'}",
        "stdout_callback = swell_json", f"local_tmp = {out.resolve()}/.ansible/tmp",
        # (every machine's is in its host_vars, under the run's work directory; this one
        # is the control machine's own, for the plays that run there)
        f"remote_tmp = {out.resolve()}/.ansible/remote-tmp", "retry_files_enabled = false",
        f"host_key_checking = {ssh.strict_host_keys}", "forks = 16",
        "interpreter_python = auto_silent", "",
        "[ssh_connection]", "pipelining = true", f"ssh_args = {' '.join(args)}", ""])


def write_inventory(plan: TestbedPlan, hosts: HostsFile, out: str | Path) -> Path:
    """Write ``inventory.yml``, ``host_vars/``, ``ansible.cfg`` and ``testbed.json``."""
    out = Path(out)
    (out / "host_vars").mkdir(parents=True, exist_ok=True)
    write_text(out / "inventory.yml", yaml.safe_dump(inventory(plan, hosts, out),
                                                    sort_keys=False))
    for name, hv in host_vars(plan, hosts).items():
        write_text(out / "host_vars" / f"{name}.yml", yaml.safe_dump(hv, sort_keys=False))
    write_text(out / "ansible.cfg", ansible_cfg(hosts, out))
    write_json(out / "testbed.json", {"format": "swell-testbed", "version": 1,
                                      "hosts": hosts.model_dump(mode="json"),
                                      "plan": plan.to_json()})
    return out
