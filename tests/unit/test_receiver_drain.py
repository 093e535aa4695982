"""swell-gen's receivers (`precv`, `recv`) told to stop log what is still in flight.

A stop signal interrupts a receive that has a timeout (EINTR even with SA_RESTART):
before the drain, a receiver exited on the spot and the datagrams still on the path
were counted lost (CI: the packet kind's last two datagrams, sent within 6 ms of the
window's end over a 5 ms bottleneck, in both runs). Loopback, no root: a datagram sent
30 ms after the stop stands for one still in flight.
"""

from __future__ import annotations

import signal
import socket
import struct
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from swell.native import native_artifact


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def message(seq: int, size: int, tx_ns: int) -> bytes:
    head = struct.pack(">QQ", seq, tx_ns)
    return head + bytes(size - len(head))


@pytest.mark.parametrize("mode", ["precv", "recv"])
def test_stopped_receiver_logs_what_was_in_flight(tmp_path: Path, mode: str) -> None:
    port, log = free_port(), tmp_path / "rx.bin"
    argv = [str(native_artifact("swell-gen")), mode, "--listen", f"127.0.0.1:{port}",
            "--proto", "udp", "--log", str(log), "--duration", "60"]
    proc = subprocess.Popen(argv + (["--size", "64"] if mode == "recv" else []),
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            # a path of 20 ms one way: the receiver measures it from the first message
            s.sendto(message(0, 64, time.monotonic_ns() - 20_000_000), ("127.0.0.1", port))
            time.sleep(0.2)
            proc.send_signal(signal.SIGTERM)
            stopped = time.monotonic()
            time.sleep(0.03)
            s.sendto(message(1, 64, time.monotonic_ns() - 20_000_000), ("127.0.0.1", port))
            proc.wait(timeout=10)
        waited = time.monotonic() - stopped
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0
    rows = np.fromfile(log, dtype="<u8").reshape(-1, 4)
    assert sorted(rows[:, 0].tolist()) == [0, 1], "the datagram in flight at the stop is lost"
    # quiet for 1.5 x 20 ms + 50 ms (at least 100 ms) after the last arrival, then exit
    assert 0.1 <= waited < 1.0, waited
