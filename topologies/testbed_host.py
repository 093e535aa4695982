"""What swell does on one testbed machine: ``swell testbed host plan|engine|up|down|...``.

The playbooks stay thin: each copies the machine's rendered variables
(``swell_host`` in its host_vars, see :mod:`swell.topologies.testbed`) to
``STATE/host.json``. Layout is commands Ansible runs itself: ``plan`` prints
the rendered layout steps (``ip``, ``tc``, ``sysctl``, ``ethtool``;
:mod:`swell.topologies.testbed_steps`) whose state is not on the machine yet,
grouped into commands, and logs their undo first; the layout role runs them
one task item each. What they make:

* **Edge machine**: the ``/30`` of its link to the router and its emulated
  hosts as ``/32`` aliases on its experiment interface, a route for the
  experiment's network via the router, segmentation offloads off.
* **Router**: its end of every link, the core namespace ``<prefix>-core`` with
  two veths, one policy rule per incoming link (client-side links into the
  left veth, server-side links into the right one), routes to every
  machine's emulated subnets, forwarding on and reverse-path filtering off,
  offloads off, and the shaping: where the router's kernel has ``sch_netem``
  and ``sch_htb`` (``router_engine: auto``, or ``netem``), tc's htb/netem on
  the router's and the core's egress with the core forwarding by the kernel.

``engine`` then starts what runs on the router, unless it runs already: with
netem one ``tcpdump`` per bottleneck direction (pids in
``STATE/tcpdump-*.pid``), otherwise ``swell-link`` started detached
(``--name <prefix>``; its pid in ``STATE/engine.pid``), waited for until it
says ``READY``. ``STATE/engine.json`` says which (``plan`` chooses it).
``up`` does ``plan``, its commands and ``engine`` here, without Ansible.

Everything that is changed is first written to ``STATE/undo.json`` (before the
change, so a run killed half way can still be undone), with the previous
value of every sysctl and offload. ``down`` undoes exactly those entries,
newest first, ignoring what is already gone, kills the engine and whatever
still runs from ``STATE`` (by the prefix on its command line), deletes the
core namespace and the interfaces with the prefix, and removes ``STATE``. It
never touches anything it did not record or that lacks the prefix.
``down`` also stops the jobs of a run (``swell testbed host run``,
:mod:`swell.topologies.testbed_exec`) by the pids it recorded in
``STATE/jobs/pids.json``, each only if its command is still the one started.
``captures`` says whether the router's bottleneck captures are being written
(the ``run`` playbook checks it before any traffic starts). ``facts`` prints
kernel, tools, qdiscs, offloads, clock state and the digest of the installed
swell's sources (``prepare`` compares it with the control machine's) as JSON.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from swell.errors import EnvironmentProblem, SwellError
from swell.fsutil import write_json


def sh(*argv: str, check: bool = True,
       input: str | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(argv), capture_output=True, text=True, input=input)
    if check and proc.returncode != 0:
        raise SwellError(" ".join(argv[:4]), (proc.stderr or proc.stdout).strip()[:300])
    return proc


class Undo:
    """The undo log in ``STATE/undo.json`` (``plan`` appends to it before each change)."""

    def __init__(self, state: Path) -> None:
        self.path = state / "undo.json"
        self.entries: list[list[str]] = []
        with contextlib.suppress(OSError, ValueError):
            self.entries = json.loads(self.path.read_text())

    def replay(self) -> list[str]:
        errors = []
        for argv in reversed(self.entries):
            proc = subprocess.run(argv, capture_output=True, text=True)
            err = proc.stderr.strip()
            if proc.returncode != 0 and not _gone(err):
                errors.append(f"{' '.join(argv)}: {err}")
        return errors


def _gone(err: str) -> bool:
    """Errors that mean the thing to remove is not there any more."""
    return any(s in err for s in ("Cannot find device", "No such", "does not exist",
                                  "Cannot assign", "not found", "RTNETLINK answers: No such",
                                  "handle of zero"))


def router_engine(choice: str) -> str:
    """netem where this kernel has sch_netem and sch_htb (``auto``), else swell-link."""
    from swell.topologies.probe import kernel_has_qdisc

    ok = kernel_has_qdisc("netem") and kernel_has_qdisc("htb")
    if choice == "netem" and not ok:
        raise EnvironmentProblem("router_engine", "netem asked for but this kernel lacks "
                                 "sch_netem or sch_htb")
    return "netem" if choice == "netem" or (choice == "auto" and ok) else "native"


def start_captures(v: dict[str, Any], state: Path) -> bool:
    """With netem: one tcpdump per bottleneck direction on the core's egress, as the local
    netem engine (pids in ``STATE/tcpdump-*.pid``); False when they already run."""
    from swell.tcpdump import tcpdump_argv

    core = v["core"]
    ns = core["netns"]
    write_json(state / "tc-devices.json", {
        "router": sorted({c[c.index("dev") + 1] for c in v["netem"]["router"]}),
        "core": [core["right"]["core_if"], core["left"]["core_if"]]})
    if not v["capture"].get("enabled", True) or _tcpdumps_alive(state):
        return False
    (state / "capture").mkdir(parents=True, exist_ok=True)
    for direction, side in (("forward", "right"), ("reverse", "left")):
        pcap = state / "capture" / f"bottleneck-{direction}.pcap"
        err = state / f"tcpdump-{direction}.err"
        argv = ["ip", "netns", "exec", ns, *tcpdump_argv(core[side]["core_if"], pcap,
                                                         int(v["capture"]["snaplen"]), "out")]
        with err.open("wb") as fe:
            proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=fe,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        (state / f"tcpdump-{direction}.pid").write_text(str(proc.pid))
        deadline = time.monotonic() + 10
        while b"listening on" not in err.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise EnvironmentProblem("tcpdump", err.read_text().strip()[-300:] or
                                         "not capturing within 10 s")
            time.sleep(0.05)
    return True


def _tcpdumps_alive(state: Path) -> bool:
    """Every capture this machine started still runs (and at least one was started)."""
    files = sorted(state.glob("tcpdump-*.pid"))
    running = 0
    for f in files:
        with contextlib.suppress(OSError, ValueError):
            pid = int(f.read_text())
            running += str(state).encode() in b" ".join(_cmdline(pid)) and not _zombie(pid)
    return bool(files) and running == len(files)


def _stop_netem(prefix: str, state: Path) -> bool:
    """SIGINT the captures (they flush), keep the qdiscs' counters; True if any ran."""
    pids = []
    for f in sorted(state.glob("tcpdump-*.pid")):
        try:
            pid = int(f.read_text())
        except (OSError, ValueError):
            continue
        if str(state).encode() in b" ".join(_cmdline(pid)):
            pids.append(pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{p}").exists() and not _zombie(p) for p in pids) and \
            time.monotonic() < deadline:
        time.sleep(0.05)
    _stop([p for p in pids if Path(f"/proc/{p}").exists() and not _zombie(p)])
    try:
        devs = json.loads((state / "tc-devices.json").read_text())
    except (OSError, ValueError):
        return bool(pids)
    stats: dict[str, Any] = {}
    for where, names in devs.items():
        for dev in names:
            argv = ["tc", "-s", "-j", "qdisc", "show", "dev", dev]
            if where == "core":
                argv = ["ip", "netns", "exec", f"{prefix}-core", *argv]
            res = sh(*argv, check=False)
            if res.returncode == 0 and res.stdout.strip():
                stats[f"{where}/{dev}"] = json.loads(res.stdout)
    write_json(state / "tc-stats.json", stats)
    return bool(pids) or bool(stats)


def start_engine(v: dict[str, Any], state: Path, timeout: float = 10.0) -> int:
    """Start swell-link detached (survives this command), wait for READY, write its pid."""
    from swell.native import native_artifact

    (state / "capture").mkdir(parents=True, exist_ok=True)
    cfg = state / "link.json"
    write_json(cfg, v["engine"])
    out, err = state / "engine.out", state / "engine.err"
    with out.open("wb") as fo, err.open("wb") as fe:
        proc = subprocess.Popen([str(native_artifact("swell-link")), "--name", v["prefix"],
                                 "--rt-priority", "10", str(cfg)], stdout=fo, stderr=fe,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    (state / "engine.pid").write_text(str(proc.pid))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if b"READY" in out.read_bytes():
            return proc.pid
        if proc.poll() is not None:
            raise EnvironmentProblem("swell-link", err.read_text().strip()[:300] or "exited")
        time.sleep(0.05)
    proc.kill()
    raise EnvironmentProblem("swell-link", f"not READY within {timeout} s")


def _ancestors() -> set[int]:
    out, pid = set(), os.getpid()
    while pid > 1:
        out.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def _cmdline(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


def _pids_under(*folders: Path) -> list[int]:
    """Processes (not this command or its callers) with an argument inside a folder."""
    skip = _ancestors()
    roots = [str(f).encode() for f in folders]
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in skip:
            if any(a == r or a.startswith(r + b"/") for a in _cmdline(int(entry))
                   for r in roots):
                pids.append(int(entry))
    return pids


def _engine_pid(prefix: str, state: Path) -> list[int]:
    """The engine this machine started, if it still runs (checked by its ``--name``)."""
    try:
        pid = int((state / "engine.pid").read_text())
    except (OSError, ValueError):
        return []
    return [pid] if prefix.encode() in _cmdline(pid) else []


def _stop(pids: list[int], timeout: float = 5.0) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pids = [p for p in pids if Path(f"/proc/{p}").exists() and not _zombie(p)]
            if not pids:
                return
            time.sleep(0.05)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def _job_pids(state: Path) -> list[int]:
    """The run's jobs still running here (their pids as ``testbed_exec`` recorded them,
    each only while its command is still the one it started)."""
    try:
        recs = json.loads((state / "jobs" / "pids.json").read_text()).values()
    except (OSError, ValueError, AttributeError):
        return []
    out = []
    for rec in recs:
        try:
            pid, argv0 = int(rec["pid"]), str(rec["argv0"]).encode()
        except (TypeError, KeyError, ValueError):
            continue
        cmd = _cmdline(pid)
        if cmd and cmd[0] == argv0 and not _zombie(pid):
            out.append(pid)
    return out


def capture_status(prefix: str, state: Path) -> dict[str, Any]:
    """The router's bottleneck captures: running and written (SwellError if not)."""
    if not (state / "engine.json").exists():
        raise SwellError(state, "not laid out (no engine.json): run the layout playbook")
    engine = json.loads((state / "engine.json").read_text())["engine"]
    if engine == "netem":  # (no pid files: captures off)
        alive = _tcpdumps_alive(state) or not list(state.glob("tcpdump-*.pid"))
    else:
        alive = bool(_engine_pid(prefix, state))
    files = {p.name: p.stat().st_size for p in sorted((state / "capture").glob("*.pcap"))}
    if not alive:
        raise SwellError(state, f"the router's {engine} engine or its captures stopped")
    return {"engine": engine, "captures": files}


def host_down(prefix: str, state: Path) -> list[str]:
    """Undo what ``up`` recorded under ``state``; return what could not be undone."""
    if not prefix or not state.name or prefix not in str(state):
        raise SwellError(state, f"state directory does not carry the run prefix {prefix!r}")
    # what still runs from this machine's state, and from Ansible's own files in the run's
    # work directory (the asynchronous wrapper of a killed run's part runs from there); not
    # the whole work directory: where machines share one (machines that are namespaces of
    # one host, sharing /proc) it holds every machine's state, and the other machines' own
    # teardown commands would be killed
    work = [state.parent / ".ansible-tmp"] if state.parent.name == prefix else []
    _stop(_engine_pid(prefix, state) + _pids_under(state, *work) + _job_pids(state))
    errors = Undo(state).replay() if state.exists() else []
    ns_file = Path(f"/run/netns/{prefix}-core")
    if ns_file.exists():
        sh("ip", "netns", "del", ns_file.name, check=False)
    for dev in os.listdir("/sys/class/net"):
        if dev.startswith(prefix):
            sh("ip", "link", "del", dev, check=False)
    shutil.rmtree(state, ignore_errors=True)
    return errors


def stop_engine(prefix: str, state: Path) -> bool:
    """Stop this machine's engine (it flushes its captures); True if one was running."""
    if (state / "tc-devices.json").exists():
        return _stop_netem(prefix, state)
    pids = _engine_pid(prefix, state)
    _stop(pids, timeout=10.0)
    return bool(pids)


MAC = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")


def resolve_ifaces(v: dict[str, Any]) -> dict[str, Any]:
    """``v`` (host.json) with every experiment interface given by MAC address (a hosts
    file from a testbed's manifest) named as this machine names it."""
    given = [v["iface"]] if v["kind"] == "edge" else [p["ifname"] for p in v["ports"]]
    macs = [g for g in given if MAC.match(g)]
    if not macs:
        return v
    here: dict[str, str] = {}
    for dev in sorted(Path("/sys/class/net").iterdir()):
        with contextlib.suppress(OSError):
            here.setdefault((dev / "address").read_text().strip().lower(), dev.name)
    text = json.dumps(v)
    for m in macs:
        if m.lower() not in here:
            raise SwellError(v.get("name", "router"), f"no interface with MAC address {m} here")
        text = text.replace(m, here[m.lower()])
    return json.loads(text)


def host_plan(v: dict[str, Any]) -> dict[str, Any]:
    """What layout still has to run on this machine (``swell testbed host plan``): the
    rendered steps whose state is not there yet, grouped into commands, their undo
    logged first (:mod:`swell.topologies.testbed_steps`); the router's engine chosen
    here (``STATE/engine.json``)."""
    from swell.topologies.testbed_steps import plan_host

    v = resolve_ifaces(v)
    state = Path(v["state"])
    if not v.get("prefix") or v["prefix"] not in str(state):
        raise SwellError(state, "state directory does not carry the run prefix")
    state.mkdir(parents=True, exist_ok=True)
    engine = None
    if v["kind"] == "router":
        engine = router_engine(v.get("engine_choice", "auto"))
        write_json(state / "engine.json", {"engine": engine})
    return plan_host(v, state / "undo.json", engine)


def host_engine(v: dict[str, Any]) -> str:
    """Start the router's engine unless it runs (``swell testbed host engine``): swell-link
    with its captures, or with netem the captures; says which."""
    v = resolve_ifaces(v)
    state = Path(v["state"])
    try:
        engine = json.loads((state / "engine.json").read_text())["engine"]
    except (OSError, ValueError, KeyError):
        raise SwellError(state, "no engine chosen (run swell testbed host plan first)") from None
    if engine == "netem":
        return "captures started" if start_captures(v, state) else "netem: captures running"
    if _engine_pid(v["prefix"], state):
        return "swell-link running"
    start_engine(v, state)
    return "swell-link started"


def host_up(v: dict[str, Any]) -> str:
    """Lay this machine out here, without Ansible: the plan's commands, then the engine."""
    from swell.topologies.testbed_steps import run_batches

    plan = host_plan(v)
    run_batches(plan["batches"])
    said = f"{plan['todo']} of {plan['steps']} steps run"
    return f"{said}; {host_engine(v)}" if v["kind"] == "router" else said


def facts() -> dict[str, Any]:
    """What this machine offers a testbed run (``prepare`` records and checks it)."""
    def version(*argv: str) -> str:
        try:
            p = subprocess.run(list(argv), capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return "not found"
        lines = (p.stdout or p.stderr).strip().splitlines()
        return lines[0] if lines else "unknown"

    from swell.native import native_dir
    from swell.topologies.probe import kernel_has_qdisc, native_engine_status

    ok, why = native_engine_status()
    native = native_dir()
    sync = version("timedatectl", "show", "-p", "NTPSynchronized", "--value")
    return {
        "hostname": platform.node(), "kernel": platform.release(),
        "machine": platform.machine(), "cpus": os.cpu_count(),
        "netem": kernel_has_qdisc("netem"), "htb": kernel_has_qdisc("htb"),
        "native_engine": ok, "why_not_native": why, "clock_synchronized": sync,
        # where this swell looks for its native programs (prepare installs them there)
        "native_dir": str(native.resolve()),
        "swell_gen": (native / "swell-gen").exists(),
        "swell_link": (native / "swell-link").exists(), "swell_digest": source_digest(),
        "tools": {"tc": version("tc", "-V"), "ethtool": version("ethtool", "--version"),
                  "httperf": version("httperf", "--version"),
                  "apache2": version("/usr/sbin/apache2", "-v"),
                  "tcpdump": version("tcpdump", "--version"), "python": platform.python_version()},
    }


# the packages a swell wheel holds (pyproject.toml's [tool.setuptools] packages) and
# the package data it adds (the bundled experiment files)
PACKAGES = ("swell", "swell.extract", "swell.extract.flows", "swell.topologies",
            "swell.generators", "swell.analysis", "swell.experiments")
PACKAGE_DATA = {"swell.experiments": ("*.yaml",)}


def source_digest() -> str:
    """A digest of the installed swell's sources (what a wheel of it holds): the same on
    the control machine and a machine running the same swell, whatever the paths."""
    h = hashlib.sha256()
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        locations = list(spec.submodule_search_locations or []) if spec else []
        if not locations:
            h.update(f"{name}: missing\n".encode())
            continue
        folder = Path(locations[0])
        files = sorted(f for pattern in ("*.py", *PACKAGE_DATA.get(name, ()))
                       for f in folder.glob(pattern))
        for f in files:
            h.update(f"{name}/{f.name}\n".encode())
            h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()[:16]
