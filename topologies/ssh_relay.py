"""Run one command on a testbed machine over ssh, as if it ran here.

Traffic code starts processes with ``Place.argv``/``Place.popen`` and stops
them with signals (SIGINT: httperf and tcpdump print their counters; SIGTERM:
servers, generators). A signal sent to a local ``ssh`` client only kills the
client: the remote process keeps running and its last words are lost. So a
testbed place runs this relay locally (``python -m swell.topologies.ssh_relay
SSH-ARGV...``): it starts ``ssh`` with a pipe as its stdin and forwards every
signal it gets as a line on that pipe; the remote side is :data:`REMOTE`, a
small ``sh`` wrapper that starts the command, turns each line into a ``kill``
of it, and kills it (SIGTERM) when its stdin closes, i.e. when the relay or
the ssh connection died for any reason (SIGKILL included). The command's
output travels back on ssh's stdout and stderr as usual; the relay exits the
way the command did (killed by the signal it was sent: the same signal here).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

RELAYED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
           signal.SIGUSR2)

# $1.. = the command, exec'd by the wrapper (so it keeps SIGINT, which an
# asynchronous list of a non-interactive shell would ignore); the watcher reads
# the relay's pipe (signal names, one a line) and signals it; EOF: SIGTERM
REMOTE = r"""p=$$
exec 3<&0 </dev/null
( while read -r s <&3; do kill -"$s" "$p" || exit 0; done; kill -TERM "$p" ) \
  >/dev/null 2>&1 &
exec 3<&- "$@"
"""


def main(argv: list[str]) -> int:
    sent: set[int] = set()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE)
    assert proc.stdin is not None
    pipe = proc.stdin

    def relay(signum: int, _frame: object) -> None:
        sent.add(signum)
        try:
            pipe.write(f"{signal.Signals(signum).name[3:]}\n".encode())
            pipe.flush()
        except (BrokenPipeError, ValueError):
            pass

    for sig in RELAYED:
        signal.signal(sig, relay)
    while True:
        try:
            code = proc.wait()
            break
        except InterruptedError:
            continue
    # the command died of a relayed signal: ssh says 255 (exit-signal), sh 128 + N
    sig = -code if code < 0 else code - 128 if code > 128 and code - 128 in sent else 0
    if code == 255 and sent:
        sig = max(sent, key=lambda s: s == signal.SIGKILL)  # one is the usual case
    if sig in sent:
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
