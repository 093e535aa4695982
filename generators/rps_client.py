"""The RPS session runner: HTTP sessions at given start times from given source
addresses (run inside one emulated host group: ``python -m
swell.generators.rps_client SCHEDULE RECORDS``).

The schedule (JSON) lists sessions: ``{"t": start offset s, "src": address,
"reqs": [[path, think_s], ...]}`` and the server ``host``/``port``. Each
session runs in its own thread: at its start time it fetches its pages one
after another, each on a new connection bound to the session's source
address (HTTP/1.0), thinking ``think_s`` after each. One JSON line per
request attempted goes to RECORDS: session, request index, start and end
(CLOCK_MONOTONIC s), the connection's source port
(``sport``), bytes, status (or the error; no end: cut by the stop). Start times count from
the moment the schedule is read; a summary line goes to stdout at the end.

Why not httperf ``--wsesslog``: it starts sessions at a fixed or Poisson
rate, not at the times an MMPP path gives, and cannot bind a session's
connections to one of many source addresses.
"""

from __future__ import annotations

import json
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

STOP = threading.Event()


def fetch(src: str, host: str, port: int, path: str, timeout: float,
          bound: Callable[[int], None] | None = None) -> tuple[int, int]:
    """One GET on a new connection from ``src``: (status, bytes received). ``bound``
    gets the local port before the connection starts (its SYN's source port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.bind((src, 0))
        if bound is not None:
            bound(s.getsockname()[1])
        s.connect((host, port))
        name = f"[{host}]" if family == socket.AF_INET6 else host  # an IPv6 Host: header
        s.sendall(f"GET /{path} HTTP/1.0\r\nHost: {name}\r\n\r\n".encode())
        got, first = 0, b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            if len(first) < 16:
                first += chunk[:16]
            got += len(chunk)
    status = int(first.split()[1]) if first.startswith(b"HTTP/") and len(first.split()) > 1 \
        else 0
    return status, got


def session(i: int, sess: dict[str, Any], host: str, port: int,
            out: list[dict[str, Any]], lock: threading.Lock, timeout: float) -> None:
    """One session, started at its time by :func:`main`: its requests one after another."""
    for k, (path, think) in enumerate(sess["reqs"]):
        if k and STOP.is_set():  # a dispatched session records its first attempt
            return
        start = time.monotonic()
        rec: dict[str, Any] = {"session": i, "req": k, "src": sess["src"], "start": start}
        with lock:  # recorded when attempted: one still in flight at the stop has no end
            out.append(rec)
        try:
            status, got = fetch(sess["src"], host, port, path, timeout,
                                lambda p, r=rec: r.update(sport=p))
            with lock:
                rec.update(status=status, bytes=got, end=time.monotonic())
        except OSError as exc:
            with lock:
                rec.update(error=str(exc), end=time.monotonic())
        if STOP.wait(think):
            return


def main(argv: list[str]) -> int:
    sched_path, records_path = argv
    with open(sched_path) as f:
        sched = json.load(f)
    stopped: list[float] = []  # when SIGTERM came: sessions due are those before it

    def on_term(*_: object) -> None:
        stopped.append(time.monotonic())
        STOP.set()

    signal.signal(signal.SIGTERM, on_term)
    t0 = time.monotonic()
    out: list[dict[str, Any]] = []
    lock = threading.Lock()
    threads = []
    # each session's thread starts at the session's time (a thread made in advance for
    # every session would put thousands of waiting threads, made at once, before the
    # first sessions: late starts)
    dispatched = 0
    for i in sorted(range(len(sched["sessions"])), key=lambda j: sched["sessions"][j]["t"]):
        if STOP.wait(max(0.0, t0 + sched["sessions"][i]["t"] - time.monotonic())):
            break
        dispatched += 1
        th = threading.Thread(target=session, args=(i, sched["sessions"][i], sched["host"],
                                                   sched["port"], out, lock,
                                                   sched.get("timeout_s", 10.0)), daemon=True)
        th.start()
        threads.append(th)
    for th in threads:
        while th.is_alive() and not STOP.is_set():
            th.join(0.2)
    elapsed = (stopped[0] if stopped else time.monotonic()) - t0
    STOP.set()
    with lock:
        rows = [dict(r) for r in out]
    with open(records_path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    due = sorted(x["t"] for x in sched["sessions"] if x["t"] <= elapsed)  # time reached
    # due but not dispatched: how long before the stop each one's time came (the loop
    # was still waking for it, or was held up)
    missed = [round(elapsed - t, 6) for t in due[dispatched:]]
    print(json.dumps({"t0": t0, "elapsed": elapsed, "due": len(due), "started": dispatched,
                      "missed_s": missed, "requests": len(rows),
                      "errors": sum(1 for r in rows if "error" in r)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
