"""One machine's part of a testbed run: ``swell testbed host run STATE``.

The ``run`` playbook (``ansible/run.yml``) copies ``STATE/jobs.json`` (rendered on
the control machine by :mod:`swell.experiments.testbed_jobs`: the commands this
machine runs, each tagged with the step of the run it belongs to) and launches
this command as an asynchronous task, servers' machines first. It:

1. starts the **server** jobs (``bg_server``, ``fg_server`` steps) and waits for
   each one's ready line (``READY`` from ``swell-gen``; a probe, never a sleep);
2. runs the **readiness probes** recorded for this machine (a command the kind
   waits for before its clients start, e.g. ``swell-gen probe`` across the
   router to a server), each retried until it succeeds within its time;
3. starts the **readiness processes** (``bg_ready``, ``fg_ready``: the
   foreground client's own ``tcpdump``) and waits for their ready lines;
4. writes ``STATE/jobs/ready`` (``ready``, or ``failed: <why>``), which the
   playbook waits for before it launches the next group of machines;
5. waits for the **start signal**: ``STATE/jobs/start``, written by the
   playbook on every machine at once, holds the run's start time ``T0`` (epoch
   seconds), the same for every machine; when it came is recorded
   (``signal_at``: a signal that comes after ``T0`` makes every client late);
6. starts the background's clients at ``T0`` and the foreground's at
   ``T0 + warmup``; at ``T_end = T0 + total`` stops its jobs in tiers (the
   foreground's client at ``T_end``, the background's clients 0.2 s later,
   the foreground's server and capture 0.5 s later, the background's servers
   1.5 s later, as the local session stops the foreground first and servers
   last), each with its stop signal (SIGINT for ``httperf``, ``ab``
   and ``tcpdump``, which print their counters on it, sent once the tool's
   handler is in place; SIGTERM otherwise), then SIGKILL after a grace period;
7. writes every job's output (``STATE/jobs/<id>.out``, ``<id>.err``) and
   ``STATE/jobs/status.json`` (start time, per job: exit status, when it
   started and stopped, how late), which ``collect`` brings back.

Every job's pid is in ``STATE/jobs/pids.json`` as soon as it starts, so
``teardown`` (``swell testbed host down``) stops what a killed run left behind.
SIGTERM, SIGINT or SIGHUP to this command stop every job it started, at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from swell.errors import SwellError
from swell.fsutil import write_json
from swell.signals import HANDLER_WAIT_S, wait_catching

SERVER_STEPS = ("bg_server", "fg_server")
READY_STEPS = ("bg_ready", "fg_ready")
# seconds after T_end at which each step's jobs are stopped
STOP_AT = {"fg_client": 0.0, "bg_client": 0.2, "fg_ready": 0.5, "fg_server": 0.5,
           "bg_ready": 0.5, "bg_server": 1.5}
READY_TIMEOUT_S = 15.0
GRACE_S = 10.0
TICK_S = 0.05  # how often a wait looks again (lines, files, the clock)


class Stopped(Exception):
    """A stop signal reached this command."""


class Runner:
    """The jobs of one machine (see the module docstring)."""

    def __init__(self, state: Path) -> None:
        self.state = state
        try:
            self.plan = json.loads((state / "jobs.json").read_text())
        except (OSError, ValueError) as exc:
            raise SwellError(state / "jobs.json", f"cannot read: {exc}") from None
        self.dir = state / "jobs"
        self.dir.mkdir(parents=True, exist_ok=True)
        (state / "files" / "run").mkdir(parents=True, exist_ok=True)
        self.jobs: list[dict[str, Any]] = self.plan["jobs"]
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.status: dict[str, Any] = {"machine": self.plan["machine"], "start": None,
                                       "jobs": {}, "error": None}
        self.stop_requested = False

    # --- processes ---------------------------------------------------------------------

    def _files(self, job: dict[str, Any]) -> tuple[Path, Path]:
        return self.dir / f"{job['id']}.out", self.dir / f"{job['id']}.err"

    def start(self, job: dict[str, Any], due: float | None = None) -> None:
        out, err = self._files(job)
        with out.open("wb") as fo, err.open("wb") as fe:
            stderr: Any = subprocess.STDOUT if job["stderr"] == "stdout" else fe
            proc = subprocess.Popen(job["argv"], stdout=fo, stderr=stderr,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    cwd=self.state)
        self.procs[job["id"]] = proc
        now = time.time()
        self.status["jobs"][str(job["id"])] = {
            "pid": proc.pid, "started": now, "late_s": None if due is None else now - due}
        argv0 = {j["id"]: j["argv"][0] for j in self.jobs}
        write_json(self.dir / "pids.json", {str(i): {"pid": p.pid, "argv0": argv0[i]}
                                            for i, p in self.procs.items()})

    def wait_ready(self, jobs: list[dict[str, Any]], timeout: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        for job in jobs:
            if not job.get("ready"):
                continue
            out, err = self._files(job)
            path = out if job["ready"]["stream"] == "stdout" or job["stderr"] == "stdout" \
                else err
            want = job["ready"]["text"].encode()
            while want not in path.read_bytes():
                self._check_stop()
                proc = self.procs[job["id"]]
                if proc.poll() is not None:
                    tail = err.read_bytes().decode(errors="replace").strip()[-200:]
                    raise SwellError(job["label"], f"exited with status {proc.returncode} "
                                     f"before it was ready: {tail or 'no message'}")
                if time.monotonic() > deadline:
                    raise SwellError(job["label"], f"no {job['ready']['text']!r} within "
                                     f"{timeout:.0f} s")
                time.sleep(TICK_S)
            self.status["jobs"][str(job["id"])]["ready"] = time.time()

    def probe(self, job: dict[str, Any]) -> None:
        """Run a readiness probe until it succeeds (its own time, at least a try)."""
        deadline = time.monotonic() + float(job["timeout"])
        tries, last = 0, ""
        while True:
            self._check_stop()
            tries += 1
            left = max(deadline - time.monotonic(), 1.0)
            try:
                res = subprocess.run(job["argv"], capture_output=True, text=True,
                                     timeout=left + 5, cwd=self.state)
                ok, last = res.returncode == 0, (res.stderr or res.stdout).strip()
            except subprocess.TimeoutExpired:
                ok, last = False, "timed out"
            if ok:
                self.status["jobs"][str(job["id"])] = {"probe": True, "tries": tries,
                                                       "ok": time.time()}
                return
            if time.monotonic() > deadline:
                raise SwellError(job["label"], f"probe failed {tries} times: {last[-200:]}")
            time.sleep(0.2)

    def stop(self, jobs: list[dict[str, Any]]) -> None:
        """Signal every running job of ``jobs`` (newest first), then SIGKILL after grace.
        A job stopped by SIGINT (a tool that prints its counters on it) gets it once its
        handler is in place (at most :data:`HANDLER_WAIT_S` later): before that, SIGINT
        kills it with nothing printed (``swell.signals``). Not when this command itself
        was told to stop: then at once."""
        live = [j for j in reversed(jobs) if j["id"] in self.procs
                and self.procs[j["id"]].poll() is None]
        for job in live:
            if job["stop_signal"] == "SIGINT" and not self.stop_requested:
                wait_catching(self.procs[job["id"]], signal.SIGINT, HANDLER_WAIT_S)
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.procs[job["id"]].pid, getattr(signal, job["stop_signal"]))
            self.status["jobs"][str(job["id"])]["signalled"] = time.time()
        deadline = time.monotonic() + GRACE_S
        for job in live:
            proc = self.procs[job["id"]]
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                self.status["jobs"][str(job["id"])]["killed"] = True
            self.status["jobs"][str(job["id"])]["stopped"] = time.time()

    def stop_all(self) -> None:
        order = sorted(self.jobs, key=lambda j: (STOP_AT.get(j["step"], 0.0), j["id"]))
        self.stop(order)

    # --- timing ------------------------------------------------------------------------

    def _check_stop(self) -> None:
        if self.stop_requested:
            raise Stopped()

    def sleep_until(self, t: float) -> None:
        while time.time() < t:
            self._check_stop()
            time.sleep(min(TICK_S, max(t - time.time(), 0.0)))

    def wait_start(self) -> float:
        path = self.dir / "start"
        deadline = time.monotonic() + float(self.plan.get("start_timeout_s", 600))
        while True:
            self._check_stop()
            with contextlib.suppress(OSError, ValueError):
                t0 = float(path.read_text().strip())
                self.status["signal_at"] = time.time()  # how early it came: t0 - this
                return t0
            if time.monotonic() > deadline:
                raise SwellError(path, "no start signal")
            time.sleep(TICK_S)

    # --- the run -----------------------------------------------------------------------

    def of(self, steps: tuple[str, ...], kind: str = "process") -> list[dict[str, Any]]:
        return [j for j in self.jobs if j["step"] in steps and j["kind"] == kind]

    def run(self) -> None:
        servers = self.of(SERVER_STEPS)
        for job in servers:
            self.start(job)
        self.wait_ready(servers)
        for job in [j for j in self.jobs if j["kind"] == "probe"]:
            self.probe(job)
        readies = self.of(READY_STEPS)
        for job in readies:
            self.start(job)
        self.wait_ready(readies)
        (self.dir / "ready").write_text("ready\n")
        t0 = self.wait_start()
        self.status["start"] = t0
        warmup, total = float(self.plan["warmup_s"]), float(self.plan["total_s"])
        for steps, due in ((("bg_client",), t0), (("fg_client",), t0 + warmup)):
            jobs = self.of(steps)
            if jobs:
                self.sleep_until(due)
                for job in jobs:
                    self.start(job, due)
        end = t0 + total
        for offset in sorted(set(STOP_AT.values())):
            jobs = [j for j in self.jobs if STOP_AT.get(j["step"], 0.0) == offset]
            if any(j["id"] in self.procs for j in jobs):
                self.sleep_until(end + offset)
                self.stop(jobs)
        self.status["end"] = end

    def finish(self) -> None:
        for i, proc in self.procs.items():
            rec = self.status["jobs"][str(i)]
            rec["rc"] = proc.returncode
            rec.setdefault("stopped", time.time())  # ended by itself: by now
        write_json(self.dir / "status.json", self.status)


def run_jobs(state: Path) -> int:
    """Run this machine's part; 0 when every step went as planned (see the docstring)."""
    runner = Runner(state)

    def request_stop(signum: int, frame: Any) -> None:
        runner.stop_requested = True

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, request_stop)
    error: str | None = None
    try:
        runner.run()
    except Stopped:
        error = "stopped by a signal"
    except (SwellError, OSError) as exc:
        error = exc.one_line() if isinstance(exc, SwellError) else str(exc)
    finally:
        runner.stop_all()
        runner.status["error"] = error
        if error and not (runner.dir / "ready").exists():
            (runner.dir / "ready").write_text(f"failed: {error}\n")
        runner.finish()
    if error:
        raise SwellError(runner.plan["machine"], error)
    return 0
