"""A multi-host testbed for real: sshd namespaces as machines, Ansible from the root.

Five machines (two background client machines, one background server machine,
a foreground client and a foreground server) and a router, each a network
namespace with its own sshd (see ``testbed_machines``). ``swell testbed
render`` (the command) writes the inventory from an experiment file (Swing
background: the access links are drawn from the model), Ansible runs
``prepare`` (installs already satisfied), ``layout`` twice (the second finds
everything in place and changes nothing), ``collect`` and ``teardown`` over
ssh. Before the layout, the machines are set unlike a testbed (offloads on,
forwarding off and strict reverse-path filtering on the router), so layout
must change them and teardown must put them back. The round trips measured
between emulated hosts on different machines (every background client and
server, and the foreground's pair) must match the rendered access links and
bottleneck, and teardown must leave nothing: no namespace, interface,
address, rule, route or process with the run's prefix, no file in any
machine's work directory (Ansible's own included), the offloads and sysctls
as they were, ``~/.ssh`` and ``/etc/ssh`` unchanged. A second test SIGKILLs
a real ``swell run --testbed`` while its traffic runs on the machines and
runs ``teardown`` after it.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import time
from pathlib import Path

import pytest

from swell.experiments.testbed_run import playbook
from swell.topologies.testbed import EmulatedHost

from .testbed_machines import (
    MACHINES,
    REPO,
    ROLES,
    SKIPS,
    kernel_state,
    leftovers,
    plan_of,
    ssh_files,
    start_machines,
    traffic_processes,
    unlike_a_testbed,
)

pytestmark = SKIPS
EXPERIMENT = f"""
name: testbed
seed: 7
duration_s: 12
warmup_s: 3
topology:
  network: 10.78.0.0/16
  bottleneck: {{rate_mbps: 20, delay_ms: 10, queue_bytes: 100000}}
  clients: {{count: 6}}
  servers: {{count: 3}}
  foreground: {{clients: 1, servers: 1}}
background: {{kind: swing, trace: {REPO}/data/pcap/example.pcap, variant: {{target_mbps: 2}}}}
foreground: {{kind: httperf, object_bytes: 200000}}
"""
FRAME_BITS = 98 * 8  # a default ping on the wire (56 data + ICMP + IP + Ethernet)


def expected_rtt_ms(a: EmulatedHost, b: EmulatedHost, spec: dict) -> float:
    """Propagation both ways plus the ping's serialisation at every shaped pipe."""
    bn = spec["bottleneck"]
    rev = bn.get("reverse") or {}
    rtt = 2 * sum(h.link["delay_ms"] for h in (a, b) if h.link) + bn["delay_ms"] + \
        rev.get("delay_ms", bn["delay_ms"])
    rates = [h.link["rate_mbps"] for h in (a, b) if h.link and h.link.get("rate_mbps")]
    rates = rates * 2 + [bn["rate_mbps"], rev.get("rate_mbps", bn["rate_mbps"])]
    return rtt + sum(FRAME_BITS / (r * 1e6) * 1e3 for r in rates)


def ping_all(m, plan, pairs) -> dict[tuple[str, str], list[float]]:
    where = {h.ip: h.machine for h in plan.hosts}
    procs = {(a.ip, b.ip): subprocess.Popen(
        ["ip", "netns", "exec", m.ns[where[a.ip]], "ping", "-n", "-c", "8", "-i", "0.05",
         "-W", "3", "-I", a.ip, b.ip], stdout=subprocess.PIPE, text=True) for a, b in pairs}
    out = {}
    for key, p in procs.items():
        text, _ = p.communicate(timeout=60)
        out[key] = [float(x) for x in re.findall(r"time=([\d.]+) ms", text)]
    return out


@pytest.fixture
def testbed(netns, tmp_path):
    m = start_machines(netns, tmp_path, MACHINES)
    try:
        yield m
    finally:
        m.stop()


def render(m, tmp_path: Path):
    """``swell testbed render`` (the command) of the experiment onto the machines."""
    exp = tmp_path / "testbed.yaml"
    exp.write_text(EXPERIMENT)
    workdir = tmp_path / "hostfiles"
    hosts = m.hosts_file(ROLES, workdir)
    tdir = tmp_path / "tb"
    res = subprocess.run([str(REPO / ".venv/bin/python"), "-m", "swell", "testbed", "render",
                          str(exp), "--hosts", str(hosts), "-o", str(tdir)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    plan = plan_of(tdir)
    assert res.stdout.startswith(f"testbed {plan.prefix}: {len(plan.hosts)} emulated hosts on "
                                 "5 machines and a router"), res.stdout
    return plan, tdir, workdir


def changed(report: dict) -> dict[str, list[str]]:
    """Per host, the tasks of a playbook's report that changed something."""
    out: dict[str, list[str]] = {}
    for play in report["plays"]:
        for t in play["tasks"]:
            for host, r in t["hosts"].items():
                if r.get("changed"):
                    out.setdefault(host, []).append(t["task"]["name"].split(" : ")[-1])
    return out


def laid_out(value: str, key: str) -> str:
    """What layout makes of a kernel setting ``unlike_a_testbed`` set."""
    if key.endswith("tcp_congestion_control"):
        return "reno"  # the experiment's TCP on every edge machine while laid out
    if key.endswith("ip_forward"):
        return "1"
    return {"on": "off", "1": "0"}.get(value, value)  # offloads off, rp_filter 0


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_layout_rtts_collect_teardown(testbed, tmp_path):
    m = testbed
    ssh_before = ssh_files()
    plan, tdir, workdir = render(m, tmp_path)
    inv = (tdir / "inventory.yml").read_text()
    for group in ("router", "bg_clients", "bg_servers", "fg_clients", "fg_servers", "capture"):
        assert f"{group}:" in inv
    links = [h.link for h in plan.hosts if h.role == "bg"]
    assert len(links) == 9 and len({json.dumps(x, sort_keys=True) for x in links}) > 1
    unlike_a_testbed(m)
    before = kernel_state(m)
    try:
        report = playbook("prepare", tdir)
        tasks = {t["task"]["name"].split(" : ")[-1]: t["hosts"]  # without "role : "
                 for p in report["plays"] for t in p["tasks"]}
        installs = [h for name, h in tasks.items() if name.startswith("Install")]
        # the packages, swell itself (the machines run this checkout: same digest) and the
        # native programs (this checkout's build): nothing to do
        assert len(installs) == 3 and all(len(h) == 6 for h in installs), tasks.keys()
        installed = {h: [t for t in ts if t.startswith("Install")]
                     for h, ts in changed(report).items()}
        assert not any(installed.values()), f"prepare installed {installed}"
        same = tasks["Swell here is the control machine's"]
        assert len(same) == 6 and not any(r.get("failed") or r.get("skipped")
                                          for r in same.values()), same
        said = tasks["Say what this machine's kernel offers"]
        assert len(said) == 6 and all("sch_netem" in r["msg"] and "clock synchronized"
                                      in r["msg"] for r in said.values()), said
        first = playbook("layout", tdir)
        assert set(changed(first)) == set(MACHINES), changed(first)
        again = playbook("layout", tdir)  # everything in place: nothing runs, nothing changes
        assert not changed(again), changed(again)
        assert all(s["changed"] == 0 for s in again["stats"].values()), again["stats"]
        now = kernel_state(m)
        assert {k: laid_out(v, k) for k, v in before.items()} == now
        clients = [h for h in plan.hosts if h.side == "left" and h.role == "bg"]
        servers = [h for h in plan.hosts if h.side == "right" and h.role == "bg"]
        fg = [h for h in plan.hosts if h.role == "fg"]
        assert {h.machine for h in clients} == {"bgc0", "bgc1"}
        assert [h.machine for h in fg] == ["fgc0", "fgs0"]
        pairs = [(a, b) for a in clients for b in servers] + [(fg[0], fg[1])]
        rtts = ping_all(m, plan, pairs)
        for a, b in pairs:
            got = rtts[(a.ip, b.ip)]
            assert len(got) >= 4, f"{a.ip} -> {b.ip}: {len(got)}/8 replies"
            want = expected_rtt_ms(a, b, plan.spec)
            med = statistics.median(got[1:])
            assert abs(med - want) < 1.0, f"{a.ip} -> {b.ip}: {med:.2f} ms, links say {want:.2f}"
        dest = tmp_path / "collected"
        playbook("collect", tdir, {"collect_dest": str(dest)})
        assert (dest / "rtr" / "bottleneck-forward.pcap").stat().st_size > 24
        assert (dest / "rtr" / "link-stats.jsonl").stat().st_size > 0
    finally:
        playbook("teardown", tdir)
    assert not leftovers(m, plan.prefix, [workdir], plan)
    assert kernel_state(m) == before  # restored by the undo log
    assert ssh_files() == ssh_before
    playbook("teardown", tdir)  # again: nothing to do, no error


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_teardown_after_a_killed_run(testbed, tmp_path):
    """A real ``swell run --testbed`` SIGKILLed while its traffic runs on the machines:
    ``teardown`` leaves nothing (no job, executor or Ansible process, no address, route,
    namespace or file with the prefix)."""
    m = testbed
    exp = tmp_path / "testbed.yaml"
    exp.write_text(EXPERIMENT.replace("duration_s: 12", "duration_s: 60"))
    workdir = tmp_path / "hostfiles"
    hosts = m.hosts_file(ROLES, workdir)
    study = tmp_path / "study"
    assert not traffic_processes()
    run = subprocess.Popen([str(REPO / ".venv/bin/python"), "-m", "swell", "run", str(exp),
                            "--testbed", str(hosts), "-o", str(study)],
                           env={**os.environ, "SWELL_QUIET": "1"}, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 200
        starts: list[Path] = []
        while not starts:
            assert run.poll() is None, run.stderr.read().decode() if run.stderr else ""
            assert time.monotonic() < deadline, "the run never started its traffic"
            starts = list(workdir.glob("swl*/bgc0/jobs/start"))
            time.sleep(0.2)
        t0 = float(starts[0].read_text())
        while time.time() < t0 + 5:  # mid-traffic: the background's clients run
            time.sleep(0.2)
        running = traffic_processes()
        assert any("swell-gen run" in p for p in running), running
        assert any("httperf" in p for p in running), running
    finally:
        run.kill()
        run.wait()
    tdir = next(study.glob("runs/*/rep*/testbed"))
    plan = plan_of(tdir)
    assert starts[0].parent.parent.parent.name == plan.prefix
    playbook("teardown", tdir)
    deadline = time.monotonic() + 15  # the killed run's ansible-playbook got SIGTERM
    while traffic_processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not traffic_processes()
    assert not leftovers(m, plan.prefix, [workdir], plan)
    assert not (workdir / plan.prefix).exists()
