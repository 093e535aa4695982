"""Was the emulation on time? swell-link's own transmit lateness, judged per run.

``swell-link`` counts, per port, how late each forwarded frame was handed to the
kernel after the departure its pipes scheduled (``tx_late_us``: buckets of
microseconds, docs/linkemu.md). That is the emulated link's timing error as the
receivers see it: its capture stamps packets at their *scheduled* departures, so
a late engine is invisible there, but a receiver's kernel stamps the real
arrival. On a busy 2-core host the engine can be held up (the kernel's fair
server runs starved normal tasks in place of the SCHED_FIFO engine; a VM's vCPU
is descheduled), and a chirp estimator or a jitter measurement then reads the
host's disturbance as queueing.

:func:`lateness` folds the ports' buckets into one summary for results.json;
:func:`lateness_warning` is the line a run prints and the report shows when more
than :data:`WARN_SHARE` of the frames went out :data:`WARN_US` or more late.
The netem engine has no such counter (the kernel's qdiscs keep none), so its
runs carry ``None``.
"""

from __future__ import annotations

from typing import Any

WARN_US = 50  # late enough to show as queueing to a chirp at 50-100 Mbit/s (80-160 us/packet)
WARN_SHARE = 0.01


def _lower_us(bucket: str) -> float:
    """The lower bound (us) of a bucket name: "<10" -> 0, "10-20" -> 10, ">=10000" -> 1e4."""
    if bucket.startswith("<"):
        return 0.0
    if bucket.startswith(">="):
        return float(bucket[2:])
    return float(bucket.split("-", 1)[0])


def lateness(engine_stats: dict[str, Any] | None) -> dict[str, Any] | None:
    """The frames forwarded and how late they left, summed over the engine's ports;
    None when the engine kept no such counter (netem, or an older swell-link)."""
    ports = (engine_stats or {}).get("ports") or {}
    buckets: dict[str, int] = {}
    for counters in ports.values():
        for name, n in (counters.get("tx_late_us") or {}).items():
            buckets[name] = buckets.get(name, 0) + int(n)
    frames = sum(buckets.values())
    if not buckets:
        return None

    def share(us: float) -> float:
        late = sum(n for b, n in buckets.items() if _lower_us(b) >= us)
        return late / frames if frames else 0.0

    return {"frames": frames, "buckets_us": dict(sorted(buckets.items(),
                                                        key=lambda kv: _lower_us(kv[0]))),
            f"share_over_{WARN_US}us": share(WARN_US), "share_over_1ms": share(1000)}


def lateness_warning(late: dict[str, Any] | None) -> str | None:
    """The run's warning when the engine sent too many frames late, else None."""
    if not late or not late["frames"]:
        return None
    over = late[f"share_over_{WARN_US}us"]
    if over <= WARN_SHARE:
        return None
    return (f"the link engine sent {over:.1%} of {late['frames']:,} frames {WARN_US} us or "
            f"more after their departure time ({late['share_over_1ms']:.1%} 1 ms or more): "
            "the host held the emulation up, and timing-sensitive results (chirp "
            "estimates, jitter, one-way delays) carry that error")
