"""One experiment file, two places: render and drive a testbed run with Ansible.

:func:`render_run` turns a run of an experiment file into a testbed
directory: the same steps as a local run (the kinds from the registry check
and prepare themselves, the background says what hosts it needs, the
topology spec is completed by :func:`~swell.experiments.topology_plan.topology_for`
and the access links are drawn from the model with the run's seed), then
:mod:`swell.topologies.testbed` maps that spec onto the machines of a hosts
file and writes the Ansible inventory.

:func:`playbook` runs one of the thin playbooks in ``ansible/`` (``prepare``,
``layout``, ``run``, ``collect``, ``teardown``) with ``ansible-playbook``
(pinned ansible-core from requirements.lock) and its JSON callback, and turns
a failure into one line per failed host (``swell: router: layout:
<message>``), not an Ansible dump. ``ansible-playbook`` dies with the process
that started it (SIGTERM on its death, as on an interrupt), so a killed run
launches nothing more on the machines.
"""

from __future__ import annotations

import ctypes
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from swell.errors import EnvironmentProblem, SwellError
from swell.experiments.schema import RunPlan, expand_runs, load_experiment
from swell.experiments.topology_plan import topology_for
from swell.generators import registry
from swell.generators.kind import PrepareContext
from swell.topologies.testbed import HostsFile, TestbedPlan, load_hosts, plan_testbed
from swell.topologies.testbed import write_inventory as _write

ANSIBLE_DIR = Path(__file__).resolve().parent.parent / "ansible"
PLAYBOOKS = ("prepare", "layout", "run", "collect", "teardown")


def new_testbed_prefix() -> str:
    """``swl`` and four hex digits: every name swell makes on the machines carries it."""
    return "swl" + secrets.token_hex(2)


def select_run(experiment: str | Path, run: str | None = None, full: bool = False) -> RunPlan:
    """The run to render (``run``: a run key or label; default the first)."""
    exp = load_experiment(experiment, full=full)
    plans = expand_runs(exp, str(experiment))
    if run is None:
        return plans[0]
    for plan in plans:
        if run in (plan.key, plan.label):
            return plan
    raise SwellError(experiment, f"no run {run!r}; runs: {', '.join(p.label for p in plans)}")


def run_topology(plan: RunPlan, hosts: HostsFile, base_dir: Path, models: Path) -> dict[str, Any]:
    """The topology spec of one run, with one namespace per machine of each background role."""
    bg = registry.make("background", plan.spec.background)
    bg.check()
    bg.prepare(PrepareContext(base_dir, models, plan.seed))
    topo = topology_for(plan.spec.topology_spec(), bg.needs())
    topo.setdefault("seed", plan.seed)
    for group, role in (("clients", "bg_clients"), ("servers", "bg_servers")):
        count = topo[group].get("count") or 0
        if count:
            topo[group]["namespaces"] = min(count, len(hosts.by_role(role)))
    fg = topo.setdefault("foreground", {})
    fg["clients"] = min(fg.get("clients", 1), max(1, len(hosts.by_role("fg_clients"))))
    fg["servers"] = min(fg.get("servers", 1), max(1, len(hosts.by_role("fg_servers"))))
    if not hosts.by_role("fg_clients"):
        fg["clients"] = 0
    if not hosts.by_role("fg_servers"):
        fg["servers"] = 0
    return topo


def render_run(experiment: str | Path, hosts_path: str | Path, out: str | Path,
               run: str | None = None, full: bool = False,
               prefix: str | None = None) -> TestbedPlan:
    """Render the inventory and host variables of one run into ``out``."""
    from swell.topologies.addressing import plan_addresses
    from swell.topologies.spec import spec_from_dict
    from swell.topologies.topology import resolve_host_links

    hosts = load_hosts(hosts_path)
    plan = select_run(experiment, run, full)
    out = Path(out)
    topo = run_topology(plan, hosts, Path(experiment).resolve().parent, out / "models")
    spec = spec_from_dict(topo, f"{plan.key} topology")
    links = resolve_host_links(spec, plan_addresses(spec))
    tb = plan_testbed(spec, {k: list(v) for k, v in links.items()}, hosts,
                      prefix or new_testbed_prefix(),
                      congestion_control=plan.spec.congestion_control)
    _write(tb, hosts, out)
    return tb


def ansible_playbook() -> str:
    exe = Path(sys.executable).parent / "ansible-playbook"
    if exe.exists():
        return str(exe)
    found = shutil.which("ansible-playbook")
    if not found:
        raise EnvironmentProblem("ansible-playbook", "not installed (pip: ansible-core, see "
                                 "requirements.lock; scripts/bootstrap.sh installs it)")
    return found


def _failures(report: dict[str, Any]) -> list[str]:
    """One line per failed or unreachable host from the JSON callback's report."""
    lines = []
    for play in report.get("plays", []):
        for task in play.get("tasks", []):
            for host, res in task.get("hosts", {}).items():
                if res.get("failed") or res.get("unreachable"):
                    msg = res.get("stderr") or res.get("msg") or "failed"
                    msg = " ".join(str(msg).split())[:300]
                    lines.append(f"{host}: {task.get('task', {}).get('name', '?')}: {msg}")
    return lines


def _die_with_parent() -> None:
    """In the child: SIGTERM when the process that started it dies (PR_SET_PDEATHSIG)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def playbook(name: str, testbed_dir: str | Path, extra: dict[str, Any] | None = None,
             timeout: float = 600.0,
             tick: Callable[[float], None] | None = None) -> dict[str, Any]:
    """Run ``ansible/<name>.yml`` against a rendered testbed; its JSON report (``tick``:
    called with the seconds elapsed while it runs)."""
    if name not in PLAYBOOKS:
        raise SwellError("playbook", f"unknown playbook {name!r}")
    tdir = Path(testbed_dir).resolve()
    env = {**os.environ, "ANSIBLE_CONFIG": str(tdir / "ansible.cfg"),
           "ANSIBLE_HOME": str(tdir / ".ansible"), "ANSIBLE_NOCOLOR": "1"}
    argv = [ansible_playbook(), str(ANSIBLE_DIR / f"{name}.yml")]
    if extra:
        argv += ["-e", json.dumps(extra)]
    t0 = time.monotonic()
    with subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, cwd=tdir, preexec_fn=_die_with_parent) as proc:
        try:
            while True:
                try:
                    out, err = proc.communicate(timeout=0.5 if tick else timeout)
                    break
                except subprocess.TimeoutExpired:
                    if time.monotonic() - t0 > timeout:
                        raise SwellError(f"{name}.yml", f"did not finish within "
                                         f"{timeout:.0f} s") from None
                    if tick is not None:
                        tick(time.monotonic() - t0)
        except BaseException:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise
    try:
        report = json.loads(out)
    except json.JSONDecodeError:
        report = {}
    if proc.returncode != 0:
        lines = _failures(report) or [(err or out).strip()[-300:]]
        raise SwellError(f"{name}.yml", "; ".join(lines))
    return report


def task_output(report: dict[str, Any], task: str, key: str = "stdout") -> dict[str, str]:
    """Every host's ``key`` (stdout; ``msg`` for a debug task) of the task named ``task``
    in a playbook's report."""
    out: dict[str, str] = {}
    for play in report.get("plays", []):
        for t in play.get("tasks", []):
            name = str(t.get("task", {}).get("name", ""))
            if name == task or name.endswith(f" : {task}"):  # a role's: "role : name"
                out.update({h: str(r.get(key, "")) for h, r in t["hosts"].items()})
    return out
