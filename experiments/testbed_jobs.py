"""A run's traffic as every testbed machine's jobs: recorded here, run by Ansible, read back.

On a testbed nothing is started from the control machine: Ansible's ``run``
playbook launches each machine's part (:mod:`swell.topologies.testbed_exec`)
from one start signal. What each machine runs comes from the same traffic
kinds and generators as a local run, unchanged, in three passes:

1. **record** (:func:`record_traffic`): the generators are built on a
   placement whose places are :class:`JobPlace` values, one per machine, and
   driven through the session's steps up to the start of the foreground's
   clients (``start_server``, ``wait_ready``, ``start_client`` of the
   background, then of the foreground). Nothing runs: every command a
   generator starts becomes a :class:`Job` of that machine, tagged with its
   step (``bg_server``, ``bg_ready``, ``bg_client``, ``fg_server``,
   ``fg_ready``, ``fg_client``), its command line rewritten to name the
   machine's own copies of the run's files (staged for it,
   :mod:`swell.topologies.testbed_files`). A command the generator waits for
   before the traffic (``Place.run``, or a started process it waits on, such as
   a TCP probe of Apache) is a **readiness probe**: the machine runs it, retried
   until it succeeds, before its clients start; here it counts as passed. A
   process whose ready line a generator waits for (:data:`READY_LINES`:
   ``READY`` from ``swell-gen serve|recv``, ``listening on`` from ``tcpdump``)
   is waited for on the machine before the next group of machines is
   launched, and the generator sees the line now: the run only starts once
   every machine has seen it.
2. **run**: ``jobs/<machine>.json`` and ``push/<machine>.tar`` are what the
   ``run`` playbook copies to each machine (:func:`write_jobs`).
3. **replay** (:func:`replay`): each job's exit status, stdout and stderr, as
   the machine recorded them and ``collect`` brought them back, are handed to
   the generator's handles (:class:`RemoteJob` for ``Place.popen``; a small
   local stand-in process for code that starts ``Place.argv`` itself, as
   :class:`swell.tcpdump.Tcpdump` does), minus the ready line already seen;
   then the generators stop and collect as after a local run and the kinds
   make their results from the same files and lines.

Only kinds whose readiness is of those forms are known to run this way (their
``testbed`` class attribute, :class:`~swell.generators.kind.TrafficKind`); another
kind is refused before anything is laid out.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from swell.errors import SwellError
from swell.fsutil import write_json
from swell.generators import registry
from swell.generators.base import Generator
from swell.placement import Place
from swell.topologies.testbed_files import MachineFiles

READY_TIMEOUT_S = 15.0  # as the local session's
# (program, first argument or None) -> (stream, text) of the line that says it is ready
READY_LINES: dict[tuple[str, str | None], tuple[str, str]] = {
    ("swell-gen", "serve"): ("stdout", "READY"), ("swell-gen", "recv"): ("stdout", "READY"),
    ("tcpdump", None): ("stderr", "listening on")}
SIGINT_PROGRAMS = ("httperf", "ab", "tcpdump")  # they print their counters on SIGINT


def check_supported(background: str, foreground: str) -> None:
    """Refuse a kind the testbed does not run (before anything is laid out)."""
    for role, kind in (("background", background), ("foreground", foreground)):
        names = [n for n, cls in registry.kinds(role).items() if cls.testbed]
        if kind not in names:
            raise SwellError(role, f"kind {kind!r} does not run on a testbed yet (supported: "
                             f"{', '.join(names)})")


def _program(argv: list[str]) -> str:
    return PurePosixPath(argv[0]).name if argv else ""


def ready_line(argv: list[str]) -> dict[str, str] | None:
    prog, sub = _program(argv), argv[1] if len(argv) > 1 else None
    got = READY_LINES.get((prog, sub)) or READY_LINES.get((prog, None))
    return None if got is None else {"stream": got[0], "text": got[1]}


@dataclass
class Job:
    """One command of one machine (see the module docstring)."""

    id: int
    machine: str
    step: str
    kind: str  # process | probe
    argv: list[str]
    label: str
    ready: dict[str, str] | None
    stderr: str  # own | stdout (merged into stdout)
    stop_signal: str
    timeout: float = READY_TIMEOUT_S

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Recorder:
    """Every machine's jobs, in the order the generators asked for them."""

    files: dict[str, MachineFiles]
    spool: Path  # the stand-ins' job and result files
    step: str = "bg_server"
    planning: bool = True
    jobs: list[Job] = field(default_factory=list)
    handles: list[tuple[Job, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, machine: str, argv: list[str], kind: str, merged: bool = False,
            timeout: float = READY_TIMEOUT_S) -> Job:
        argv = [str(a) for a in argv]
        if not self.planning:
            raise SwellError(machine, f"{_program(argv)}: started after the traffic began; "
                             "a testbed runs only what a kind starts before it")
        if machine not in self.files:
            raise SwellError(machine, "not a machine of this testbed")
        prog = _program(argv)
        rewritten = self.files[machine].prepare(argv)
        with self._lock:  # (a kind may probe from several threads)
            job = Job(len(self.jobs) + 1, machine, self.step, kind, rewritten,
                      f"{machine}: {prog} ({self.step})", ready_line(argv) if kind == "process"
                      else None, "stdout" if merged else "own",
                      "SIGINT" if prog in SIGINT_PROGRAMS else "SIGTERM", timeout)
            self.jobs.append(job)
        return job

    def of(self, machine: str) -> list[Job]:
        return [j for j in self.jobs if j.machine == machine]


@dataclass(frozen=True)
class JobPlace(Place):
    """A testbed machine as a place: what is started there becomes one of its jobs."""

    machine: str
    recorder: Recorder = field(compare=False, hash=False, repr=False)

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.machine

    def argv(self, argv: Any) -> list[str]:
        """For code that starts the command itself: a local stand-in (see replay)."""
        job = self.recorder.add(self.machine, list(argv), "process")
        write_json(self.recorder.spool / f"{job.id}.job.json", job.to_json())
        self.recorder.handles.append((job, None))
        return [sys.executable, "-m", "swell.experiments.testbed_jobs",
                str(self.recorder.spool), str(job.id)]

    def popen(self, argv: Any, **kw: Any) -> RemoteJob:  # type: ignore[override]
        merged = kw.get("stderr") is subprocess.STDOUT
        job = self.recorder.add(self.machine, list(argv), "process", merged=merged)
        handle = RemoteJob(self.recorder, job, text=bool(kw.get("text", True)),
                           out=kw.get("stdout") is subprocess.PIPE,
                           err=kw.get("stderr") is subprocess.PIPE)
        self.recorder.handles.append((job, handle))
        return handle

    def run(self, argv: Any, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        """A command waited for before the traffic: a readiness probe on the machine."""
        self.recorder.add(self.machine, list(argv), "probe", timeout=timeout)
        return subprocess.CompletedProcess(list(argv), 0, "", "")


class RemoteJob:
    """What ``Popen`` would be for a machine's job: its output and status once it ran."""

    def __init__(self, recorder: Recorder, job: Job, text: bool, out: bool, err: bool) -> None:
        self.recorder, self.job, self.args = recorder, job, job.argv
        self.returncode: int | None = None
        self._writers: dict[str, int] = {}
        self._threads: list[threading.Thread] = []
        self.text = text
        self.stdout = self._pipe("stdout") if out else None
        self.stderr = self._pipe("stderr") if err else None
        self.seen: dict[str, str] = {}  # stream -> ready line handed over while planning
        ready = job.ready
        if ready and ready["stream"] in self._writers:
            os.write(self._writers[ready["stream"]], f"{ready['text']}\n".encode())
            self.seen[ready["stream"]] = ready["text"]

    def _pipe(self, name: str) -> Any:
        r, w = os.pipe()
        self._writers[name] = w
        return os.fdopen(r, "r" if self.text else "rb")

    def _close_writers(self) -> None:
        for w in self._writers.values():
            with contextlib.suppress(OSError):
                os.close(w)
        self._writers = {}

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not self.recorder.planning:
                raise SwellError(self.job.label, "no result from the machine")
            # waited for before the traffic: a readiness probe, run on the machine
            self.job.kind, self.job.ready = "probe", None
            self.returncode = 0
            self._close_writers()
        return self.returncode

    def communicate(self, input: Any = None, timeout: float | None = None) -> tuple[Any, Any]:
        self.wait()
        for t in self._threads:
            t.join()
        out = self.stdout.read() if self.stdout is not None else None
        err = self.stderr.read() if self.stderr is not None else None
        return out, err

    def send_signal(self, sig: int) -> None:
        """Nothing runs here: the machine stopped the job with its stop signal."""

    def terminate(self) -> None:
        """As :meth:`send_signal`."""

    def kill(self) -> None:
        """As :meth:`send_signal`."""

    def finish(self, rc: int, out: bytes, err: bytes) -> None:
        """The job's exit status and output, as the machine recorded them."""
        self.returncode = rc
        for name, data in (("stdout", out), ("stderr", err)):
            w = self._writers.pop(name, None)
            if w is None:
                continue
            data = without_ready_line(data, self.seen.get(name))
            t = threading.Thread(target=_feed, args=(w, data), daemon=True)
            t.start()
            self._threads.append(t)
        self._close_writers()


def _feed(fd: int, data: bytes) -> None:
    with contextlib.suppress(OSError), os.fdopen(fd, "wb") as fh:
        fh.write(data)


def without_ready_line(data: bytes, text: str | None) -> bytes:
    """``data`` without its first line holding ``text`` (already handed over)."""
    if not text:
        return data
    lines = data.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if text.encode() in line:
            return b"".join(lines[:i] + lines[i + 1:])
    return data


# --- the three passes --------------------------------------------------------------------


def record_traffic(bg: Generator | None, fg: Generator | None, recorder: Recorder) -> None:
    """Drive the generators through the session's steps up to the foreground's clients;
    every command becomes a job (see the module docstring)."""
    for gen in (bg, fg):
        if gen is not None:
            gen.check()
    for prefix, gen in (("bg", bg), ("fg", fg)):
        if gen is None:
            continue
        recorder.step = f"{prefix}_server"
        gen.start_server()
        recorder.step = f"{prefix}_ready"
        gen.wait_ready(READY_TIMEOUT_S)
        recorder.step = f"{prefix}_client"
        gen.start_client()
    recorder.planning = False


def write_jobs(recorder: Recorder, machines: list[str], out: Path, warmup_s: float,
               total_s: float) -> None:
    """``out/jobs/<machine>.json`` and ``out/push/<machine>.tar``: what the run playbook
    unpacks into the machine's state directory (``jobs.json``, an empty ``jobs/`` and
    its files under ``files/``)."""
    (out / "push").mkdir(parents=True, exist_ok=True)
    for m in machines:
        plan = {"machine": m, "warmup_s": warmup_s, "total_s": total_s,
                "jobs": [j.to_json() for j in recorder.of(m)]}
        write_json(out / "jobs" / f"{m}.json", plan)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:", format=tarfile.PAX_FORMAT) as tar:
            for name in ("files", "jobs"):
                info = tarfile.TarInfo(name)
                info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, int(time.time())
                tar.addfile(info)
            data = json.dumps(plan, indent=1).encode()
            info = tarfile.TarInfo("jobs.json")
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            tar.addfile(info, io.BytesIO(data))
            with tarfile.open(fileobj=io.BytesIO(recorder.files[m].bundle()), mode="r:") as fs:
                for member in fs:
                    src = fs.extractfile(member) if member.isfile() else None
                    member.name = f"files/{member.name}"
                    tar.addfile(member, src)
        (out / "push" / f"{m}.tar").write_bytes(buf.getvalue())


def replay(recorder: Recorder, outputs: dict[str, Path]) -> dict[str, Any]:
    """Hand every job's result to its handle; ``outputs``: machine -> its ``jobs`` folder
    as collected. Returns every machine's ``status.json``."""
    statuses: dict[str, Any] = {}
    for m, folder in outputs.items():
        with contextlib.suppress(OSError, ValueError):
            statuses[m] = json.loads((folder / "status.json").read_text())
    for job, handle in recorder.handles:
        if job.kind == "probe":
            continue
        folder = outputs.get(job.machine)
        rec = statuses.get(job.machine, {}).get("jobs", {}).get(str(job.id), {})
        rc = rec.get("rc")
        if folder is None or rc is None:
            raise SwellError(job.label, "the machine reported no exit status (see "
                             f"{folder or 'its jobs folder'})")
        out = _read(folder / f"{job.id}.out")
        err = _read(folder / f"{job.id}.err")
        if handle is None:  # a stand-in: it prints these when stopped
            write_json(recorder.spool / f"{job.id}.result.json",
                       {"rc": rc, "out": str(folder / f"{job.id}.out"),
                        "err": str(folder / f"{job.id}.err")})
        else:
            handle.finish(int(rc), out, err)
    return statuses


def abandon(recorder: Recorder) -> None:
    """After a failed run: every handle ends without output (so the generators stop)."""
    recorder.planning = False
    for _job, handle in recorder.handles:
        if handle is not None and handle.returncode is None:
            handle.finish(-signal.SIGKILL, b"", b"")


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


# --- the stand-in ------------------------------------------------------------------------


def stand_in(spool: Path, job_id: int) -> int:
    """Stand in here for a machine's job started with ``Place.argv``: say its ready line,
    wait for a stop signal, then print what the machine's job printed and exit as it did
    (no result: exit 1). Dies with its parent."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    job = json.loads((spool / f"{job_id}.job.json").read_text())
    signals = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    streams = {"stdout": sys.stdout.buffer, "stderr": sys.stderr.buffer}
    ready = job.get("ready")
    if ready:
        streams[ready["stream"]].write(
            f"{ready['text']} (stand-in for {job['label']})\n".encode())
        streams[ready["stream"]].flush()
    if os.getppid() != 1:
        signal.sigwait(signals)
    try:
        result = json.loads((spool / f"{job_id}.result.json").read_text())
    except (OSError, ValueError):
        sys.stderr.write(f"swell: {job['label']}: no result from the machine\n")
        return 1
    for name, key in (("stdout", "out"), ("stderr", "err")):
        data = _read(Path(result[key]))
        if ready and ready["stream"] == name:
            data = without_ready_line(data, ready["text"])
        streams[name].write(data)
        streams[name].flush()
    rc = int(result["rc"])
    return rc if rc >= 0 else 128 - rc


if __name__ == "__main__":
    sys.exit(stand_in(Path(sys.argv[1]), int(sys.argv[2])))
