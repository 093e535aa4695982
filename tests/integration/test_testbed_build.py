"""``prepare`` builds the native programs on a machine that lacks them (``native: build``).

Three sshd-namespace machines (``testbed_machines``: a router, a background client
machine and a background server machine). Their swell looks for its native programs
in an empty folder (``SWELL_NATIVE_DIR`` in the hosts file's swell command), so the
background's machines lack ``swell-gen``. With ``native: build`` in the hosts file,
``prepare`` (limited to the two background machines: the router's swell-link would be a
third build on this 2-core host) must pack
the control machine's source with its crates vendored (``swell testbed
native-source``), unpack it on the machine, build ``swell-gen`` there with cargo
``--offline`` (the machine cannot reach crates.io: its only network is the management
bridge) and install it where the machine's swell looks; the build's files must be gone
afterwards. The client machine is given ``native: auto`` and a control "build" that does
not run there: the copy is tried, fails its check, and the machine builds instead.
``native: copy`` against a control machine without a build fails in one message saying
how to build instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

from swell.experiments.testbed_run import ansible_playbook

from .testbed_machines import REPO, SKIPS, start_machines

pytestmark = [*SKIPS, pytest.mark.skipif(
    not (shutil.which("cargo") or Path("/root/.cargo/bin/cargo").exists()),
    reason="no cargo on this host to build with")]
MACHINES = ["rtr", "bgc0", "bgs0"]
ROLES = {"bgc0": "bg_clients", "bgs0": "bg_servers"}
EXPERIMENT = """
name: build
seed: 3
duration_s: 5
topology:
  network: 10.78.0.0/16
  bottleneck: {rate_mbps: 20, delay_ms: 5}
  clients: {count: 2}
  servers: {count: 1}
background: {kind: cbr, proto: udp, rate_mbps: 1}
"""


def prepare(tdir: Path, limit: str, extra: dict | None = None) -> tuple[int, dict]:
    """``ansible-playbook prepare.yml --limit LIMIT`` on the rendered testbed; its JSON."""
    env = {**os.environ, "ANSIBLE_CONFIG": str(tdir / "ansible.cfg"),
           "ANSIBLE_HOME": str(tdir / ".ansible"), "ANSIBLE_NOCOLOR": "1"}
    argv = [ansible_playbook(), str(REPO / "ansible/prepare.yml"), "--limit", limit]
    if extra:
        argv += ["-e", json.dumps(extra)]
    res = subprocess.run(argv, env=env, cwd=tdir, capture_output=True, text=True, timeout=900)
    return res.returncode, json.loads(res.stdout)


def tasks(report: dict, host: str) -> dict[str, dict]:
    return {t["task"]["name"].split(" : ")[-1]: t["hosts"][host]
            for p in report["plays"] for t in p["tasks"] if host in t["hosts"]}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_prepare_builds_the_native_programs_on_the_machine(netns, tmp_path):
    work = Path(tempfile.mkdtemp(prefix=f"{netns.prefix}-work-", dir="/tmp"))
    native = work / "native"  # empty: the machines lack every native program
    m = start_machines(netns, tmp_path, MACHINES)
    try:
        hosts = m.hosts_file(ROLES, work / "files", env=f"SWELL_NATIVE_DIR={native}")
        data = yaml.safe_load(hosts.read_text())
        hosts.write_text(yaml.safe_dump({**data, "native": "build"}))
        exp = tmp_path / "build.yaml"
        exp.write_text(EXPERIMENT)
        tdir = tmp_path / "tb"
        res = subprocess.run([str(REPO / ".venv/bin/python"), "-m", "swell", "testbed", "render",
                              str(exp), "--hosts", str(hosts), "-o", str(tdir)],
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr

        # native: copy, and the control machine has no build: one message, nothing built
        rc, report = prepare(tdir, "bgs0", {"swell_native_mode": "copy",
                                            "swell_native_local": str(work / "none")})
        assert rc != 0
        failed = tasks(report, "bgs0")["The control machine's build can serve this machine"]
        assert failed.get("failed") and "set native: build" in failed["msg"], failed
        assert "control machine has no build of it" in failed["msg"], failed
        assert not native.exists() or not any(native.iterdir())

        # bgs0 as the hosts file says (native: build); bgc0 with native: auto and a control
        # build that does not run there (as one made against a newer C library): the
        # copy is tried, fails its check, and the machine builds instead
        broken = work / "control-build"
        broken.mkdir()
        (broken / "swell-gen").write_text("#!/bin/sh\necho 'GLIBC_2.99 not found' >&2\nexit 1\n")
        (broken / "swell-gen").chmod(0o755)
        with (tdir / "host_vars" / "bgc0.yml").open("a") as f:
            f.write(f"swell_native_mode: auto\nswell_native_local: {broken}\n")
        rc, report = prepare(tdir, "bgc0,bgs0")
        for host, tried_copy in (("bgs0", False), ("bgc0", True)):
            done = tasks(report, host)
            assert rc == 0, {k: v.get("msg") for k, v in done.items() if v.get("failed")}
            copied = done.get("Copy them", {"skipped": True})
            assert bool(not copied.get("skipped")) == tried_copy, (host, copied)
            if tried_copy:
                check = done["The copies run here (each prints its usage)"]
                assert check.get("failed"), check
            build = next(v for k, v in done.items() if k.startswith("Build them ("))
            assert build["changed"] and build["rc"] == 0, build.get("stderr", "")[-2000:]
            # (offline: the machines' only network is the management bridge, no crates.io)
        assert (tdir / "native-src.tar.gz").stat().st_size > 1_000_000
        # installed where the machine's swell looks, and it runs there
        assert sorted(p.name for p in native.iterdir()) == ["swell-gen"]
        out = m.ssh("bgc0", str(native / "swell-gen"))
        assert "usage:" in out.stderr and "GLIBC" not in out.stderr, out.stderr
        facts = json.loads(m.ssh("bgc0", *data["swell"].split(), "testbed", "host",
                                 "facts").stdout)
        assert facts["swell_gen"] and facts["native_dir"] == str(native), facts
        # the build's files are gone from the machine's work directory
        state = work / "files" / json.loads((tdir / "testbed.json").read_text())["plan"]["prefix"]
        left = sorted(p.name for p in state.iterdir()) if state.exists() else []
        assert not {"native-src", "native-target", "cargo-home"} & set(left), left
    finally:
        m.stop()
        shutil.rmtree(work, ignore_errors=True)
