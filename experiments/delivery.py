"""Delivered versus asked: every run says whether its background carried its load.

Per bottleneck direction (forward: client side -> server side):

* ``asked``: the load the background kind was asked for
  (:meth:`~swell.generators.kind.TrafficKind.asked_mbps`);
* ``offered``: what its drawn schedule carries in the window (kinds that report
  it: Swing's ``load.offered_mbps``);
* ``delivered``: the application payload its clients moved in the window (Swing's
  counters) when the kind reports it, else the background's bytes at the
  bottleneck (``bottleneck.<dir>.bg_mean_mbps``, IP packets, headers included);
  the bottleneck figure is kept beside it either way.

The window is the measurement window: after the warm-up, up to the run's end
(sessions start from the beginning of the warm-up, so the window sees the
process in steady state rather than its start).

The saturated parts of the network come from the engine's final counters
(``report["engine_stats"]``): for swell-link, each pipe's bytes over the
engine's lifetime against its configured rate (host access links by address,
``up:`` host -> network, ``down:`` network -> host) and its queue drops; for
netem, each qdisc's drops and overlimits from ``tc -s``.

Problems (the run's ``problems`` list, printed on screen and boxed in the
report): delivered under ``DELIVERED_MIN`` of asked in a direction that asked
for at least ``MIN_ASKED_MBPS``, or over ``DELIVERED_MAX`` of it (an overshoot:
a warm-up short against the sessions); more than ``CUT_MAX`` of the
connections cut at the end or failed. Each names the likely cause: the CPU
(the link engine's busiest thread at its core, or every core busy: the
background's ``cpu`` metrics), a schedule that offered less (the draw of a
heavy-tailed model), saturated access links (named: busy over ``BUSY``, or
asked for more than their link before the run), a saturated bottleneck,
failed connections (with their errors), or sessions still under way at the
end (over ``UNFINISHED_MAX`` of those started: in a run that started empty,
sessions longer than the warm-up, whose load was still ramping up in the
window; in a steady start, transfers slower than the schedule's estimate, cut
off by the end).
"""

from __future__ import annotations

from typing import Any

DELIVERED_MIN = 0.90
DELIVERED_MAX = 1.10  # delivered over this share of asked: an overshoot, also a problem
# (symmetric with DELIVERED_MIN: a figure's backgrounds must carry the same load, and one
# 10-25% over it had passed unsaid)
CUT_MAX = 0.05
BUSY = 0.90  # a pipe busy over this share of its lifetime is saturated
UNFINISHED_MAX = 0.30  # over this share of started sessions unfinished: long sessions
MIN_ASKED_MBPS = 0.05  # directions asked for less are not judged (a few requests)
ENGINE_BUSY = 0.85  # the link engine's busiest thread over this share of a core: its limit
MACHINE_BUSY = 0.90  # every core together over this share: the machine's limit


def host_rates(topo: dict[str, Any]) -> dict[str, float]:
    """Access link rate (Mbit/s) of every rate-limited background host of a topology."""
    from swell.topologies.addressing import plan_addresses
    from swell.topologies.modelnet import group_links
    from swell.topologies.spec import spec_from_dict

    spec = spec_from_dict(topo)
    plan = plan_addresses(spec)
    out = {}
    for side, group, name in (("left", spec.clients, "client"), ("right", spec.servers, "server")):
        links = group_links(group, name, spec.seed)
        for ip, link in zip(plan.bg_hosts(side), links, strict=True):
            if link.rate_mbps:
                out[str(ip)] = float(link.rate_mbps)
    return out


def saturated_pipes(stats: dict[str, Any] | None, rates: dict[str, float],
                    active_s: float | None = None) -> list[dict[str, Any]]:
    """Pipes busy over ``BUSY`` of their lifetime or dropping from their queue, worst first."""
    if not stats:
        return []
    out = []
    if isinstance(stats.get("pipes"), dict):  # swell-link
        life = float(stats.get("t") or 0.0)  # the engine's lifetime, set-up included
        if active_s and 0 < active_s < life:
            life = active_s  # the traffic's own time, when the runner measured it
        for name, c in stats["pipes"].items():
            host = name.split(":", 1)[1] if name.startswith(("up:", "down:")) else None
            rate = rates.get(host) if host else None
            busy = 8 * c.get("bytes", 0) / (rate * 1e6 * life) if rate and life > 0 else None
            drops = int((c.get("drops") or {}).get("queue", 0))
            if (busy is not None and busy > BUSY) or drops:
                out.append({"pipe": name, "busy": None if busy is None else round(busy, 3),
                            "queue_drops": drops, "rate_mbps": rate})
    else:  # netem: {"node/dev": [qdisc, ...]} from tc -s -j
        for dev, qdiscs in stats.items():
            for q in qdiscs if isinstance(qdiscs, list) else []:
                drops = int(q.get("drops", 0))
                if drops:
                    out.append({"pipe": f"{dev} {q.get('kind', '')}".strip(),
                                "busy": None, "queue_drops": drops,
                                "overlimits": int(q.get("overlimits", 0))})
    return sorted(out, key=lambda p: (-(p["busy"] or 0), -p["queue_drops"]))


def cpu_cause(cpu: dict[str, Any] | None) -> str | None:
    """The CPU as the limit, in words, when the link engine or the machine was at it.

    ``cpu``: a background's ``cpu`` metrics (:mod:`swell.generators.cpushare`): the
    link engine's busiest thread (a packet loop cannot use more than its core) and
    every core together.
    """
    if not cpu:
        return None
    eng = (cpu.get("swell-link") or {}).get("busiest_thread")
    gen = (cpu.get("swell-gen") or {}).get("core_share")
    mach = cpu.get("machine_busy")
    seen = (f"the machine's {cpu.get('cores', '?')} cores "
            + (f"{mach:.0%} busy" if mach is not None else "not measured")
            + (f", the generators {gen:.0%} of a core" if gen is not None else ""))
    if eng is not None and eng >= ENGINE_BUSY:
        return (f"the CPU: the link engine (swell-link) was at its core's limit (its busiest "
                f"thread used {eng:.0%} of a core over the run; {seen}); on one machine it "
                "also carries the receiving hosts' TCP work, so this machine cannot emulate "
                "the load: a faster machine, an engine per machine (testbed) or a smaller load")
    if mach is not None and mach >= MACHINE_BUSY:
        return (f"the CPU: {seen} (link engine "
                + (f"{eng:.0%} of a core" if eng is not None else "not measured")
                + "): the machine cannot emulate the load (a smaller load, or fewer other "
                  "jobs on the machine)")
    return None


def _unfinished_cause(sessions: dict[str, Any] | None, warm: float | None,
                      steady: dict[str, Any] | None = None) -> str | None:
    """Long sessions as a reason, in words, when many of those started never finished.
    A run that started empty: a stationary arrival process fills the population of
    active sessions over about one session length, so a warm-up shorter than that
    measures a load still ramping up. A steady start (``steady``: the schedule's
    ``steady_start``) began with that population; what its window misses is what the
    sessions still had to move at the end when they ran slower than estimated."""
    started = int((sessions or {}).get("started") or 0)
    done = int((sessions or {}).get("completed") or 0)
    if started < 10 or done >= (1 - UNFINISHED_MAX) * started:
        return None
    if steady:
        return (f"{started - done} of {started} sessions started were still under way at "
                f"the end (the run started with {steady.get('sessions_under_way', 0)} under "
                "way): their transfers ran slower than the schedule's estimate, which the "
                "window's end cuts off (a longer duration_s evens this out)")
    w = f"the {warm:g} s warm-up" if warm is not None else "the warm-up"
    return (f"{started - done} of {started} sessions started were still under way at the "
            f"end: sessions that long fill up over about their own length, so after {w} "
            "the load may still have been ramping up in the window (a longer warmup_s)")


def _cause(d: str, offered: float | None, asked: float, sat: list[dict[str, Any]],
           bn_busy: float | None, conns: dict[str, Any], cpu: dict[str, Any] | None = None,
           overloaded: set[str] | None = None, sessions: dict[str, Any] | None = None,
           warm: float | None = None, steady: dict[str, Any] | None = None) -> str:
    """The likely reason a direction fell short, in words.

    An access link is saturated when it was busy over ``BUSY`` of the run, or when the
    schedule asked its host for more than its link carries (``overloaded``: the pre-run
    warning's hosts; TCP backs off, so such a link can stay under ``BUSY``). A link that
    only dropped a few packets in bursts is not a cause while another one is named.
    """
    reasons = []
    if (why := cpu_cause(cpu)) is not None:
        reasons.append(why)
    if offered is not None and offered < DELIVERED_MIN * asked:
        reasons.append(f"the drawn schedule offered only {offered:.2f} Mbit/s in the window "
                       "(a heavy-tailed draw: see the spread over seeds)")
    links = [p for p in sat if p["pipe"].startswith(("up:", "down:"))]
    hosts = [p for p in links if (p["busy"] is not None and p["busy"] > BUSY)
             or p["pipe"].split(":", 1)[1] in (overloaded or set())]
    if hosts:
        names = ", ".join(f"{p['pipe']} ({p['busy']:.0%} busy)" if p["busy"] is not None
                          else f"{p['pipe']} ({p['queue_drops']} drops)" for p in hosts[:5])
        reasons.append(f"{len(hosts)} saturated access links: {names} (give the topology "
                       "more background hosts)")
    if bn_busy is not None and bn_busy > BUSY:
        reasons.append(f"the bottleneck is {bn_busy:.0%} busy ({d})")
    bursts = [p for p in links if p not in hosts]
    if bursts and not reasons:
        names = ", ".join(f"{p['pipe']} ({p['queue_drops']} drops"
                          + (f", {p['busy']:.0%} busy)" if p["busy"] is not None else ")")
                          for p in bursts[:3])
        reasons.append(f"{len(bursts)} access links dropped packets in bursts while under "
                       f"{BUSY:.0%} busy: {names}")
    other = [p for p in sat if not p["pipe"].startswith(("up:", "down:"))]
    if other and not links:
        reasons.append("drops at " + ", ".join(p["pipe"] for p in other[:3]))
    if (why := _unfinished_cause(sessions, warm, steady)) is not None:
        reasons.append(why)
    if conns.get("failed"):  # last: what failed, with its errors
        reasons.append(f"{conns['failed']} connections failed ({conns.get('errors')})")
    return "; ".join(reasons) or "no saturated link seen: the sessions' own pace (round " \
                                  "trips, loss, think times) kept the load lower"


def _overshoot_cause(d: str, offered: dict[str, float], asked: dict[str, float],
                     warmup_s: float | None, steady: dict[str, Any] | None = None) -> str:
    """Why a direction delivered well above its asked load, in words."""
    warm = f"{warmup_s:g} s " if warmup_s is not None else ""
    o = offered.get(d)
    if o is None:
        return "more than the kind's model asks arrived in the window (no schedule to compare)"
    both_o = sum(v for v in offered.values() if v is not None)
    both_a = sum(v for v in asked.values() if v is not None)
    if steady and o <= DELIVERED_MAX * asked[d]:
        return (f"the schedule offered {o:.2f} Mbit/s in the window by its transfer-time "
                "estimate; the sessions moved more of their bytes inside it than estimated "
                "(a longer window evens this out)")
    if o > DELIVERED_MAX * asked[d] and both_o > DELIVERED_MAX * both_a:
        return (f"the schedule offered {o:.2f} Mbit/s in the window ({both_o:.2f} both ways "
                f"for {both_a:.2f} asked): the {warm}warm-up is short against the model's "
                "sessions, and the sessions drawn to fill it start their later connections "
                "inside the window (give warmup_s several session lengths)")
    if o > DELIVERED_MAX * asked[d]:
        return (f"the schedule offered {o:.2f} Mbit/s in the window in this direction (both "
                f"ways {both_o:.2f} for {both_a:.2f} asked): the draw split the load between "
                "the directions unlike the model's mean (heavy-tailed sizes; see the spread "
                "over seeds)")
    return (f"the schedule offered {o:.2f} Mbit/s in the window; sessions of the {warm}warm-up "
            "finished inside it (a longer warm-up and window even this out)")


def delivery(asked: dict[str, float] | None, background: dict[str, Any],
             bottleneck: dict[str, dict[str, Any]], engine_stats: dict[str, Any] | None,
             topo: dict[str, Any], path_mbps: dict[str, float | None],
             active_s: float | None = None) -> tuple[dict[str, Any], list[str]]:
    """The run's ``load`` entry and its problems (see the module docstring)."""
    load = background.get("load") or {}
    offered = load.get("offered_mbps") or {}
    payload = load.get("delivered_mbps") or {}
    try:
        rates = host_rates(topo)
    except Exception:  # noqa: BLE001 - a topology the collector cannot re-plan has no rates
        rates = {}
    sat = saturated_pipes(engine_stats, rates, active_s)
    conns = background.get("connections") or {}
    cpu = background.get("cpu")
    hosts = background.get("hosts") or {}
    overloaded = {h for side in ("servers", "clients")
                  for h in (hosts.get(side) or {}).get("overloaded_hosts", [])}
    warm = (load.get("window_s") or [None])[0]
    steady = load.get("steady_start")
    out: dict[str, Any] = {"window": "measurement window: end of warm-up to end of run",
                           "saturated": sat[:20], "saturated_count": len(sat), "cpu": cpu,
                           "connections": conns, "sessions": background.get("sessions")}
    problems = []
    for d in ("forward", "reverse"):
        at_bn = float(bottleneck.get(d, {}).get("bg_mean_mbps", 0.0))
        delivered = payload.get(d, at_bn) if payload else at_bn
        a = (asked or {}).get(d)
        cap = path_mbps.get(d)
        bn_busy = float(bottleneck.get(d, {}).get("all_mean_mbps", 0.0)) / cap if cap else None
        out[d] = {"asked_mbps": a, "offered_mbps": offered.get(d),
                  "delivered_mbps": delivered, "bottleneck_bg_mbps": at_bn,
                  "delivered_share": delivered / a if a else None}
        if a is not None and a >= MIN_ASKED_MBPS and delivered < DELIVERED_MIN * a:
            problems.append(f"background {d}: delivered {delivered:.2f} of {a:.2f} Mbit/s "
                            f"asked ({delivered / a:.0%}) in the window; likely cause: "
                            + _cause(d, offered.get(d), a, sat, bn_busy, conns, cpu, overloaded,
                                     background.get("sessions"), warm, steady))
        elif a is not None and a >= MIN_ASKED_MBPS and delivered > DELIVERED_MAX * a:
            problems.append(f"background {d}: delivered {delivered:.2f} of {a:.2f} Mbit/s "
                            f"asked ({delivered / a:.0%}), well above it, in the window; "
                            "likely cause: " + (load.get("overshoot_cause")
                                                or _overshoot_cause(d, offered, asked or {},
                                                                    warm, steady)))
    started = int(conns.get("started") or 0)
    bad = int(conns.get("cut") or 0) + int(conns.get("failed") or 0)
    if started and bad / started > CUT_MAX:
        problems.append(f"background: {conns.get('cut', 0)} connections cut at the end and "
                        f"{conns.get('failed', 0)} failed of {started} ({bad / started:.0%}); "
                        "likely cause: " + _cause("both", None, 1.0, sat, None, conns, cpu,
                                                  overloaded, background.get("sessions"), warm,
                                                  steady))
    return out, problems
