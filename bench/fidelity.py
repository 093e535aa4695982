"""Fidelity bench of the Swing generator (manual; root): ``.venv/bin/python bench/fidelity.py``.

For each real capture (issue 5, "How it must be checked", DESIGN 5):

1. extract the Swing model (``swell.extract.pipeline.extract_model``), saved under ``--work``;
2. bring up a dumbbell (``Topology``, native engine) whose background hosts get
   the model's per-host network parameters (``model:`` draw in the topology
   spec: delay, capacity and loss of one observed host per emulated host, as
   many emulated hosts per side as the model has observed hosts, so the
   trace's server popularity maps one to one) and a 100 Mbit/s bottleneck with
   a 1000-packet queue, far above anything these traces carry (not the limit);
   TCP congestion control ``--cc`` (default reno, what ``swell run`` uses by default)
   is set in every namespace right after the topology is up
   (``swell.experiments.tcpsettings.set_tcp``): a new namespace inherits the host's
   default otherwise (bbr on the bench host, which paces every sender);
3. make the Swing kind through the registry as an experiment file names it
   (``swell.generators.registry``), let it draw a schedule at the model's rate
   (scale 1, fixed seed) for ``--factor`` times the trace's length and build its
   generator on the topology's placement (one ``swell-gen`` per namespace), and
   drive it with ``swell run``'s session (``swell.experiments.session``);
4. capture both bottleneck directions. Direction mapping: in the original,
   client -> server and server -> client by the model's roles
   (``swell.analysis.timeseries``'s ``roles`` rule: the SYN sender is the
   client, and a UDP flow's client as the extractor decides it; until
   2026-12-01 the ``syn`` rule, whose UDP client is the higher port, which
   judged 27% of campus's game clients' bytes the other way); at the bottleneck,
   forward (client side -> server side) is ``c2s`` because Swing clients open
   every connection, reverse is ``s2c`` (the roles rule applied to the merged
   generated capture is printed as a check);
5. compare with ``swell.analysis.fidelity``: mean throughput per direction
   (within 10%?), energy per octave against the original's first-half /
   second-half floor, KS distances of the generated capture re-extracted
   against the model; print the table, write ``fidelity.json``, ``table.txt``
   and the overlay plots (PNG + SVG) under ``--out/<capture>/``.

The generated window is ``[client start, client start + run length)``; sessions
still open at its end are cut by a hard stop two seconds later. The table also
gives the payload the schedule offered and the generator carried, and the
spread of the offered load over 200 seeds (schedules only): with one or two
sessions per application in a trace, the Poisson session count of a run decides
its mean throughput far more than the generator does (``docs/fidelity.md``).

Captures: the bundled ``data/pcap/example.pcap`` (15.6 s) and
``../shared/data/pcap/ndpi/alexa-app.pcapng`` (176 s, an Android phone using
Amazon's Alexa app, from the nDPI test suite), each a single user; and two
**many-user composites** built by ``swell trace compose`` (real captures
merged, each copy one more user with its own addresses, time-shifted inside
the span): ``campus`` (example, opera-vpn, nintendo and 443-firefox, 24 copies
each, 120 s) and ``web-lan`` (example, 24 copies, 60 s). The shared captures
are LGPL: they are only read from ``../shared`` and never copied into this
repository (a capture whose file is absent is skipped with a message); only
derived numbers and plots are written.

Composites are generated for several trace lengths and measured after a
warm-up of one trace length (``Capture.warmup``): the steady state, where
sessions started before the window stand in for those cut at its end. With
``--calibrate`` the schedule's offered payload in the measured window is
drawn within 5% of the model's mean (as ``swell run`` does for a target rate).

Run time: about 11 minutes for example and alexa-app (4 x 15.6 s and 3 x
175.5 s of traffic), 8 for campus (357 s) and 6 for web-lan (229 s);
``--factor`` overrides the run length, ``--max-run`` caps it, ``--only``
picks captures.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fidelity_seeds import seeds_plots, seeds_summary, seeds_table  # noqa: E402

from swell.analysis.bottleneck import (  # noqa: E402
    load_bottleneck,
    load_clients_side,
    merge_directions,
)
from swell.analysis.cli import _fidelity_plots  # noqa: E402
from swell.analysis.fidelity import (  # noqa: E402
    FidelityConfig,
    FidelityResult,
    add_ks,
    fidelity,
    format_table,
    model_distributions,
    reextracted_distributions,
)
from swell.analysis.timeseries import directions_by_rule, load_packets  # noqa: E402
from swell.experiments.emulation import lateness  # noqa: E402
from swell.experiments.tcpsettings import CONGESTION_CONTROLS  # noqa: E402
from swell.extract.network import AT_CLIENTS_S  # noqa: E402
from swell.fsutil import write_json  # noqa: E402
from swell.generators.samples import ANCHOR_THINK_S as DEFAULT_ANCHOR_THINK_S  # noqa: E402
from swell.generators.schedule import read_schedule  # noqa: E402
from swell.steal import steal_ns  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SEED = 1


@dataclass(frozen=True)
class Capture:
    name: str
    path: Path
    note: str
    factor: float  # run length / trace length
    warmup: float = 0.0  # trace lengths generated before the measured window
    sources: tuple[Path, ...] = ()  # a composite: built from these (swell trace compose)
    copies: int = 0
    span_s: float = 0.0


CAPTURES = [
    Capture("example", REPO / "data/pcap/example.pcap", "bundled, 15.6 s, one LAN's web/DNS",
            4.0),
    Capture("alexa-app", SHARED / "data/pcap/ndpi/alexa-app.pcapng",
            "nDPI test capture (LGPL, read from ../shared, not copied), 176 s, one phone",
            3.0),
    Capture("campus", Path("/tmp/swell-fidelity/campus/campus.pcap"),
            "composite of 4 real captures x 24 users each (swell trace compose), 120 s",
            3.0, warmup=1.0,
            sources=(REPO / "data/pcap/example.pcap", SHARED / "data/pcap/ndpi/opera-vpn.pcapng",
                     SHARED / "data/pcap/ndpi/nintendo.pcap",
                     SHARED / "data/pcap/ndpi/443-firefox.pcap"),
            copies=24, span_s=120.0),
    Capture("web-lan", Path("/tmp/swell-fidelity/web-lan/web-lan.pcap"),
            "example.pcap x 24 LANs (swell trace compose), 60 s",
            4.0, warmup=1.0, sources=(REPO / "data/pcap/example.pcap",),
            copies=24, span_s=60.0),
]
MAX_HOSTS = 256  # emulated hosts per side at most; the trace's servers fold onto them


def topology_dict(model: Path, n_clients: int, n_servers: int, seed: int = SEED,
                  at_clients: bool = False,
                  quickack: dict[str, Any] | None = None) -> dict[str, Any]:
    """A dumbbell with model-drawn access links and a bottleneck that is not the limit;
    ``quickack``: per side, (port, share) of the hosts that ACK every segment."""
    quick = {side: [{"port": p, "share": s} for p, s in rows]
             for side, rows in (quickack or {}).items()}
    return {
        "network": "10.79.0.0/16",
        "bottleneck": {"rate_mbps": 100, "delay_ms": 0, "queue_packets": 1000},
        "clients": {"count": n_clients, "model": {"path": str(model), "side": "client",
                                                  "pairing": CLIENT_PAIRING},
                    "quickack": quick.get("client", [])},
        "servers": {"count": n_servers, "model": {"path": str(model), "side": "server"},
                    "quickack": quick.get("server", [])},
        "engine": "native",
        "capture": {"clients": at_clients},
        "seed": seed,
    }


def bench_spec(model_dir: Path, model: Any, seed: int = SEED) -> Any:
    """The topology spec: as many emulated hosts per side as the model has observed hosts."""
    from swell.generators.samples import quickack_shares
    from swell.topologies.spec import spec_from_dict

    n_c = min(MAX_HOSTS, max(1, len(model.arrays["net/client/delay_s"])))
    n_s = min(MAX_HOSTS, max(1, len(model.arrays["net/server/delay_s"])))
    quick = quickack_shares(model) if ACKS == "model" else None
    return spec_from_dict(topology_dict(model_dir, n_c, n_s, seed,
                                        monitor_of(model)[0] == "clients", quick),
                          "fidelity topology")


def monitor_of(model: Any) -> tuple[str, str]:
    """Where the generated traffic is judged, and why: ``--monitor``, or with ``auto``
    where the trace's monitor sat: beside the clients when their measured one-way
    delays (half the SYN/ACK -> ACK leg at the monitor) have a median under
    ``AT_CLIENTS_S`` (a capture taken on the users' machines), else at the bottleneck."""
    if MONITOR != "auto":
        return MONITOR, "--monitor"
    d = model.arrays["net/client/delay_s"][model.arrays["net/client/delay_s_measured"]
                                           .astype(bool)]
    if not d.size:
        return "bottleneck", "auto: no client delay measured"
    med = float(np.median(d))
    return ("clients" if med < AT_CLIENTS_S else "bottleneck",
            f"auto: the trace's clients' median one-way delay {med * 1e3:.3f} ms")


def extract(cap: Capture, out: Path) -> tuple[Path, Any]:
    from swell.extract.model import load_model, save_model
    from swell.extract.pipeline import extract_model

    model_dir = out / "model"
    m = extract_model(cap.path, label=f"extract {cap.name}")
    if CAP_SCALE != 1.0:  # --capacity-scale: a sensitivity run, not the model's links
        for side in ("client", "server"):
            m.arrays[f"net/{side}/capacity_bps"] = m.arrays[f"net/{side}/capacity_bps"] * CAP_SCALE
    if SERVER_DELAY_MS is not None:  # --server-delay-ms: a sensitivity run, one delay for all
        m.arrays["net/server/delay_s"] = m.arrays["net/server/delay_s"] * 0 + SERVER_DELAY_MS / 1e3
    if CLIENT_RATE_MBPS is not None:  # --client-rate-mbps: a sensitivity run, one rate
        m.arrays["net/client/capacity_bps"] = (m.arrays["net/client/capacity_bps"] * 0
                                               + CLIENT_RATE_MBPS * 1e6)
    save_model(m, model_dir)
    return model_dir, load_model(model_dir)


CALIBRATE = False
CC = "reno"  # --cc: TCP congestion control in every namespace (swell run's default)
RRE_DRAW = "independent"  # --rre-draw joint: each RRE drawn whole (docs/scale.md 7.2)
START = "steady"  # --start empty: every session arrives in the run (before 2026-11-30)
SERVER_WAIT = True  # --no-server-wait: responses leave at once (before 2026-11-30 noon)
SERVER_MATCH = "delay"  # --server-match none: hosts in any order (before 2026-11-30 evening)
PAIR_WAIT = "own"  # --pair-wait drawn: whole sessions' waits drawn afresh (before 2026-12-01)
CLIENT_MATCH = "link"  # --client-match none: whole sessions on the least loaded client host
ANCHOR_THINK_S = DEFAULT_ANCHOR_THINK_S  # --anchor-think: requests after this pause anchored
EARLY = "none"  # --early pairs|connections: requests that do not wait (early_requests)
PER_APP: dict[str, dict[str, Any]] = {}  # --per-app NAME:KEY=VALUE: swell run's per_app
ACKS = "model"  # --acks stack: every host delays its ACKs (before 2026-12-01 evening)
MONITOR = "auto"  # --monitor: where the generated traffic is judged (monitor_of)
# sensitivity knobs (docs/fidelity.md, "Receive windows and access-link rates"):
RMEM: str | None = None  # --rmem "MIN DEFAULT MAX": net.ipv4.tcp_rmem in every namespace
CAP_SCALE = 1.0  # --capacity-scale: every access link's capacity times this
SERVER_DELAY_MS: float | None = None  # --server-delay-ms: every server's one-way delay
CLIENT_RATE_MBPS: float | None = None  # --client-rate-mbps: every client's access capacity
CLIENT_PAIRING = 0.0  # --client-pairing: every client's access link pairs packets (LinkDir)


def usable_apps(model_dir: Path) -> tuple[list[Any], float, list[str]]:
    """The model's applications the generator can run, and those it cannot (no exchanges).

    An application whose connections never carried a byte (e.g. alexa-app's
    ``http-alt-tcp``: five SYN-only or one-way attempts) has no request/response
    samples; ``build_schedule`` leaves it out (as the Swing kind's runs do), and the
    table lists it; the offered-load spread draws from these.
    """
    from swell.generators.schedule import apps_for_draw, load_app_samples

    apps, scale = load_app_samples(model_dir)
    apps = apps_for_draw(apps, RRE_DRAW)  # as swell run draws
    ok = [a for a in apps if a.req_size.size and a.rsp_size.size and a.num_pairs.size]
    return ok, scale, [a.name for a in apps if a not in ok]


TAIL_S = 2.0  # the clients' hard stop comes this long after the generated window's end


def swing_background(model_dir: Path, out: Path, seed: int = SEED) -> Any:
    """The Swing kind as an experiment file names it, made through the registry.

    ``background: {kind: swing, model: ..., rre_draw: ...}``; with ``CALIBRATE``
    (``--calibrate``) also ``variant: {target_mbps: <the model's mean>}``, which is how
    ``swell run`` draws a schedule for a target rate: the session count chosen so the
    schedule carries that rate over the run (``swing_schedule``, no seed selection; the
    spread that is left is reported over ``--seeds``). The kind extracts nothing here
    (the model is given); its variant, if any, is saved under ``out/cache``.
    """
    from swell.extract.model import load_model
    from swell.generators import registry
    from swell.generators.kind import PrepareContext

    options: dict[str, Any] = {"kind": "swing", "model": str(model_dir), "rre_draw": RRE_DRAW,
                               "start": START, "server_wait": SERVER_WAIT,
                               "server_match": SERVER_MATCH, "client_match": CLIENT_MATCH,
                               "pair_wait": PAIR_WAIT, "anchor_think_s": ANCHOR_THINK_S,
                               "early_requests": EARLY, "per_app": PER_APP}
    if CALIBRATE:
        options["variant"] = {"target_mbps": load_model(model_dir).mean_rate_bps() / 1e6}
    kind = registry.make("background",
                         registry.kind_class("background", "swing").Spec.model_validate(options))
    kind.check()
    kind.prepare(PrepareContext(base_dir=out, cache_dir=out / "cache", seed=seed))
    return kind


def run_swing(model_dir: Path, model: Any, out: Path, run_s: float, warmup_s: float = 0.0,
              seed: int = SEED) -> dict[str, Any]:
    """Generate ``run_s`` seconds of Swing traffic through the dumbbell; capture it.

    The kind builds its generator on the topology's placement (sessions mapped onto
    the emulated hosts by their access links) and :class:`~swell.experiments.session.Session`
    drives it as ``swell run`` does (probed readiness, live counters, always stopped).
    The one difference: the clients' hard stop is ``TAIL_S`` after the schedule's end
    (``swell run`` stops them at it), so the window's end is not the generator's.
    """
    from dataclasses import replace

    from swell.experiments.session import Session
    from swell.experiments.tcpsettings import set_tcp
    from swell.generators.kind import RunContext
    from swell.generators.swing import SwingGenerator, load_records
    from swell.progress import Progress
    from swell.topologies.placement import placement_of
    from swell.topologies.topology import Topology

    kind = swing_background(model_dir, out, seed)
    spec = bench_spec(model_dir, model, seed)
    cap_dir = out / "capture"
    with Topology(spec, capture_dir=cap_dir) as topo:
        set_tcp(topo, CC)
        if RMEM:  # caps every receiver's buffer, hence its advertised window
            for node in topo.layout.nodes:
                topo.run_in(node, ["sysctl", "-q", "-w", f"net.ipv4.tcp_rmem={RMEM}"])
        built = kind.build(RunContext(out_dir=out / "background", placement=placement_of(topo),
                                      seed=seed, duration_s=run_s, warmup_s=warmup_s))
        assert isinstance(built, SwingGenerator)
        gen = SwingGenerator(replace(built.cfg, duration_s=run_s + TAIL_S))
        session = Session(gen, None)
        steal0, cpu0 = steal_ns(), os.times()
        with Progress(f"swing {out.name}", total=run_s + TAIL_S, unit="s") as prog:
            session.run(0.0, run_s + TAIL_S, prog)
        host_load = {"steal_ms": (steal_ns() - steal0) / 1e6,
                     "children_cpu_s": sum(os.times()[2:4]) - sum(cpu0[2:4]),
                     "loadavg_1min": os.getloadavg()[0]}
        res = session.collect_background(0.0)
        links = {h.ip: h.link for h in topo.clients + topo.servers}
    assert res is not None
    return {"t0_ns": int(session.window().clients_started * 1e9), "capture_dir": cap_dir,
            "records": load_records(res.files["records"]), "schedule": res.files["schedule"],
            "report": topo.report, "links": links, "monitor": monitor_of(model),
            "host_load": host_load}


def compare(cap: Capture, model_dir: Path, run: dict[str, Any], run_s: float,
            out: Path, warmup_s: float = 0.0, seed: int = SEED, ks: bool = True
            ) -> FidelityResult:
    """Original (whole trace) against the generated window ``[t0 + warm-up, t0 + run)``.

    ``ks``: also re-extract the generated capture and compare its distributions with
    the model's (a model extraction per run: with ``--seeds`` only seed 1 does it).
    """
    cfg = FidelityConfig()
    orig = load_packets(cap.path)
    dirs_o = directions_by_rule(orig, cfg.direction)
    where, why = run["monitor"]
    load = load_clients_side if where == "clients" else load_bottleneck
    gen, dirs_g = merge_directions(load(run["capture_dir"]))
    t0 = int(run["t0_ns"])
    w0, w1 = t0 + int(warmup_s * 1e9), t0 + int(run_s * 1e9)
    inside = (gen.ts_ns >= t0) & (gen.ts_ns < w1)
    if inside.sum() < 0.5 * len(gen):  # the readiness probes come before t0, little else
        raise RuntimeError(f"capture clock: only {inside.sum()} of {len(gen)} packets in the "
                           "run's window; are capture timestamps wall-clock time?")
    result = fidelity(orig, gen, cfg, directions=(dirs_o, dirs_g),
                      grids=((int(orig.ts_ns.min()), None), (w0, w1)))
    roles = directions_by_rule(gen, "roles")
    agree = {d: float(gen.size[roles[d] & dirs_g[d]].sum() / max(gen.size[dirs_g[d]].sum(), 1))
             for d in dirs_g}
    if not ks:
        add_ks(result, None, None, "not computed for this seed (KS: seed 1 of --seeds)")
    else:
        merged = out / "generated.pcap"
        subprocess.run(["mergecap", "-F", "pcap", "-w", str(merged),
                        *(str(run["capture_dir"] / f) for f in
                          ("bottleneck-forward.pcap", "bottleneck-reverse.pcap"))], check=True)
        d_gen, note = reextracted_distributions(merged)
        if d_gen is None:
            add_ks(result, None, None, note)
        else:
            add_ks(result, model_distributions(model_dir), d_gen,
                   "generated bottleneck capture re-extracted vs the model")
    recs = run["records"]
    sched = read_schedule(run["schedule"])
    from swell.extract.model import load_model
    from swell.generators.swing import offered_mbps

    result.meta.update({
        "warmup_s": warmup_s, "window_s": run_s - warmup_s,
        "offered_in_window_mbps": offered_mbps(sched, warmup_s),
        "model_mean_mbps": load_model(model_dir).mean_rate_bps() / 1e6,
        "calibrated": CALIBRATE, "congestion_control": CC,
        "tcp_rmem": RMEM, "capacity_scale": CAP_SCALE, "server_delay_ms": SERVER_DELAY_MS,
        "client_rate_mbps": CLIENT_RATE_MBPS, "client_pairing": CLIENT_PAIRING,
        "monitor": where, "monitor_why": why,
        "client_match": sched.meta.get("hosts", {}).get("client_match"),
        "scheduled_payload_bps": {
            "c2s": 8.0 * sum(c.req_bytes for *_, c in sched.conns()) / run_s,
            "s2c": 8.0 * sum(c.rsp_bytes for *_, c in sched.conns()) / run_s},
        "carried_payload_bps": {"c2s": 8.0 * sum(r["tx"] for r in recs) / run_s,
                                "s2c": 8.0 * sum(r["rx"] for r in recs) / run_s},
        "capture": cap.name, "original": str(cap.path), "note": cap.note,
        "run_s": run_s, "seed": seed, "syn_rule_agreement": agree,
        "connections": len(recs), "connections_ok": sum(1 for r in recs if r.get("ok")),
        "connections_cut": sum(1 for r in recs if r.get("error") == "cut"),
        "connection_errors": sorted({r["error"] for r in recs if r.get("error")}),
        "engine": run["report"].get("engine"), "problems": run["report"].get("problems"),
        "host_load": run.get("host_load"),
        "engine_lateness": lateness(run["report"].get("engine_stats")),
        "apps_left_out": usable_apps(model_dir)[2],
        "acks": ack_summary(cap.path, run["capture_dir"]),
    })
    return result


def ack_summary(original: Path, capture_dir: Path) -> dict[str, Any]:
    """Pure ACKs per data segment of each direction's receiver, original and generated
    (``swell.analysis.acks``; issue 19: they are most of the client -> server packets)."""
    from swell.analysis.acks import measure

    gen = measure([str(capture_dir / f) for f in ("bottleneck-forward.pcap",
                                                 "bottleneck-reverse.pcap")])
    orig = measure([str(original)])
    keys = ("data_segments", "acks_by_receiver", "acks_per_data_segment",
            "pure_ack_share_of_ip_bytes")
    return {name: {d: {k: res[d][k] for k in keys} for d in ("c2s", "s2c")}
            for name, res in (("original", orig), ("generated", gen))}


def summary_lines(result: FidelityResult) -> list[str]:
    m = result.meta
    rmem = f" (tcp_rmem {m['tcp_rmem']})" if m.get("tcp_rmem") else ""
    if m.get("client_pairing"):
        rmem += f", client links pairing {m['client_pairing']:g}"
    lines = [f"capture {m['capture']}, TCP {m['congestion_control']}{rmem}, measured at the "
             f"{m.get('monitor', 'bottleneck')} ({m.get('monitor_why', '')}): {m['note']}",
             f"  generated {m['run_s']:.0f} s, measured the last {m['window_s']:.0f} s "
             f"(warm-up {m['warmup_s']:.0f} s), seed {m['seed']}"
             + (" (schedule calibrated)" if m["calibrated"] else "") + ", offered in the "
             f"window {m['offered_in_window_mbps']:.3f} Mb/s of payload, model mean "
             f"{m['model_mean_mbps']:.3f}",
             f"  engine {m['engine']}"
             + (", host during the run: steal {steal_ms:.0f} ms, generators' CPU "
                "{children_cpu_s:.0f} s, 1-min load {loadavg_1min:.2f}".format(**m["host_load"])
                if m.get("host_load") else "")
             + (f", frames the engine sent 1 ms or more late "
                f"{m['engine_lateness']['share_over_1ms']:.2%}"
                if m.get("engine_lateness") else "") + ", "
             f"{m['connections']} connections ({m['connections_ok']} complete, "
             f"{m['connections_cut']} cut at the end; errors: {m['connection_errors'] or 'none'})",
             "  payload per second, scheduled -> carried by the generator (whole run): "
             + ", ".join(f"{d} {m['scheduled_payload_bps'][d] / 1e6:.4f} -> "
                         f"{m['carried_payload_bps'][d] / 1e6:.4f} Mb/s" for d in ("c2s", "s2c")),
             f"  applications left out (no exchanges to generate): {m['apps_left_out'] or 'none'}",
             "  bytes whose roles-rule direction matches the bottleneck file: "
             + ", ".join(f"{d} {v:.1%}" for d, v in m["syn_rule_agreement"].items())]
    if "acks" in m:
        a = m["acks"]
        lines.append("  receivers' pure ACKs per data segment, original -> generated: "
                     + ", ".join(f"of {d} data {a['original'][d]['acks_per_data_segment']:.3f}"
                                 f" -> {a['generated'][d]['acks_per_data_segment']:.3f}"
                                 for d in ("c2s", "s2c")))
    if result.ks:
        ds = np.array([k.distance for k in result.ks])
        lines.append(f"  KS distances: {len(ds)} distributions, median D={np.median(ds):.3f}, "
                     f"max D={ds.max():.3f}")
    return lines


def schedule_spread(model_dir: Path, model: Any, run_s: float, seeds: int = 200
                    ) -> dict[str, Any]:
    """How far the offered load of a seeded schedule strays from the trace's, over seeds.

    Swing draws a Poisson number of sessions following the trace's session
    starts; a trace with one or two sessions per application gives a run of a
    few trace lengths only a handful of sessions, each with heavy-tailed sizes.
    Payload bytes scheduled server -> client per second, divided by the
    trace's, for seeds 1..``seeds`` (schedules only, no network): the spread a
    single seeded run is drawn from.
    """
    from swell.generators.schedule import build_schedule
    from swell.topologies.topology import Topology

    apps, scale, _ = usable_apps(model_dir)
    trace_bps = 8.0 * sum(a["bytes_s2c"] for a in model.meta["apps"].values()) / model.duration_s
    plan = Topology(bench_spec(model_dir, model))  # addresses only; never brought up
    clients, servers = [h.ip for h in plan.clients], [h.ip for h in plan.servers]
    ratios = []
    for seed in range(1, seeds + 1):
        sched = build_schedule(apps, clients, servers, run_s, seed, scale=scale)
        rsp = sum(c.rsp_bytes for _, _, _, c in sched.conns())
        ratios.append(8.0 * rsp / run_s / trace_bps)
    r = np.array(ratios)
    return {"seeds": seeds, "run_s": run_s, "trace_payload_s2c_bps": trace_bps,
            "ratio_bench_seed": float(r[SEED - 1]),
            "ratio_p10_p50_p90": [float(x) for x in np.percentile(r, [10, 50, 90])],
            "within_10pct": float(np.mean(np.abs(r - 1) <= 0.1))}


def spread_line(sp: dict[str, Any]) -> str:
    p10, p50, p90 = sp["ratio_p10_p50_p90"]
    return (f"  scheduled s2c payload / trace's over {sp['seeds']} seeds: p10 {p10:.2f}, "
            f"median {p50:.2f}, p90 {p90:.2f}; within 10%: {sp['within_10pct']:.0%} of seeds; "
            f"seed {SEED}: {sp['ratio_bench_seed']:.2f}")


@dataclass(frozen=True)
class Prepared:
    """A capture made ready for its runs: composite built, model extracted, lengths set."""

    cap: Capture
    model_dir: Path
    run_s: float
    warmup_s: float


def prepare(cap: Capture, out_root: Path, work_root: Path, factor: float | None,
            max_run: float, spread_seeds: int) -> Prepared:
    """Compose (a composite), extract the model and measure the offered-load spread: once
    per capture, shared by every seed's run."""
    out = out_root / cap.name
    out.mkdir(parents=True, exist_ok=True)
    work = work_root / cap.name
    work.mkdir(parents=True, exist_ok=True)
    if cap.sources:
        from swell.extract.compose import build

        info = build(cap.path, list(cap.sources), cap.copies, cap.span_s)
        write_json(out / "composite.json", {**info, "sources": [
            {**src, "path": os.path.relpath(p, REPO)} for src, p in zip(info["sources"],
                                                                       cap.sources, strict=True)]})
    model_dir, model = extract(cap, work)
    run_s = round(min((factor or cap.factor) * model.duration_s, max_run), 1)
    warmup_s = round(cap.warmup * model.duration_s, 1) if run_s > cap.warmup * model.duration_s \
        else 0.0
    spread = schedule_spread(model_dir, model, run_s, spread_seeds)
    write_json(out / "schedule-spread.json", spread)
    print(f"== {cap.name}: trace {model.duration_s:.1f} s, generating {run_s:.0f} s\n"
          + spread_line(spread), flush=True)
    return Prepared(cap, model_dir, run_s, warmup_s)


def run_seed(prep: Prepared, seed: int, out: Path, work: Path, plots: Path, ks: bool = True
             ) -> FidelityResult:
    """One seed's run of a prepared capture: tables to ``out``, plots to ``plots``."""
    from swell.extract.model import load_model

    for d in (out, work, plots):
        d.mkdir(parents=True, exist_ok=True)
    model = load_model(prep.model_dir)
    run = run_swing(prep.model_dir, model, work, prep.run_s, prep.warmup_s, seed)
    result = compare(prep.cap, prep.model_dir, run, prep.run_s, work, prep.warmup_s, seed, ks)
    table = "\n".join(summary_lines(result)) + "\n\n" + format_table(result)
    print(table, flush=True)
    (out / "table.txt").write_text(table + "\n")
    write_json(out / "fidelity.json", result.to_dict())
    links = {ip: (None if lk is None else json.loads(lk.model_dump_json()))
             for ip, lk in run["links"].items()}
    write_json(plots / "access-links.json", links)
    for d in result.directions:
        _fidelity_plots(plots, d, argparse.Namespace(unit=result.config.unit))
    return result


def _worker_task(*args: Any) -> tuple[str, int, FidelityResult]:
    """:func:`_seed_task` in a pool worker: stopped (SIGTERM, Ctrl-C), the run unwinds
    (its dumbbell torn down) and the worker exits. The pool's worker loop would catch
    the KeyboardInterrupt and take the next queued run, with SIGTERM ignored from then
    on (``swell.cli``'s handler ignores a second one)."""
    try:
        return _seed_task(*args)
    except KeyboardInterrupt:
        os._exit(130)


def _seed_task(prep: Prepared, seed: int, out_root: Path, work_root: Path, several: bool
               ) -> tuple[str, int, FidelityResult]:
    """One (capture, seed) run; with several seeds, per-seed tables under
    ``<out>/seeds/seed<k>/<capture>/``, plots and access links beside the work files."""
    name = prep.cap.name
    work = work_root / f"seed{seed}" / name
    if several:
        out, plots = out_root / "seeds" / f"seed{seed}" / name, work / "plots"
    else:
        out = plots = out_root / name
    return name, seed, run_seed(prep, seed, out, work, plots, ks=seed == 1 or not several)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO / "docs/fidelity",
                    help="plots, tables and fidelity.json per capture")
    ap.add_argument("--work", type=Path, default=Path("/tmp/swell-fidelity"),
                    help="models, captures and generator logs (large; not for the repository)")
    ap.add_argument("--factor", type=float, help="run length / trace length (default: "
                    "4 for example, 3 for alexa-app)")
    ap.add_argument("--max-run", type=float, default=600.0, help="cap on a run's length, s")
    ap.add_argument("--only", action="append", help="capture name(s) to run")
    ap.add_argument("--spread-only", action="store_true",
                    help="only the schedules' offered-load spread over seeds (no network)")
    ap.add_argument("--spread-seeds", type=int, default=200,
                    help="seeds for the offered-load spread (schedules only)")
    ap.add_argument("--calibrate", action="store_true",
                    help="draw the schedule as `swell run` does for a target rate: the "
                    "session count chosen so it carries the model's mean (by construction, "
                    "no seed selection)")
    ap.add_argument("--seeds", type=int, default=1,
                    help="run seeds 1..N; with N > 1 each seed's tables go to "
                    "<out>/seeds/seed<k>/<capture>/ (plots under --work) and the mean and "
                    "spread over seeds to <out>/<capture>/seeds.json, seeds.txt and "
                    "seeds_energy_<dir>.png")
    ap.add_argument("--rre-draw", choices=("independent", "joint", "session"),
                    default="independent",
                    help="independent: numConn, interConn and numPairs one by one (Swing's "
                    "draw, swell run's default); joint: each RRE drawn whole from the "
                    "model's joint RRE sample (docs/scale.md 7.2)")
    ap.add_argument("--start", choices=("steady", "empty"), default="steady",
                    help="steady: the run starts with the sessions under way (swell run's "
                    "default, docs/scale.md 9); empty: every session arrives in the run")
    ap.add_argument("--no-server-wait", action="store_true",
                    help="responses leave their server as soon as the request is in (the "
                    "model's rspWait unused: swell run before 2026-11-30 noon)")
    ap.add_argument("--server-match", choices=("delay", "none"), default="delay",
                    help="delay: an observed server's RREs go to the hosts nearest its own "
                    "delay (swell run's default); none: to hosts in any order")
    ap.add_argument("--pair-wait", choices=("own", "drawn"), default="own",
                    help="own: a whole session's pairs wait what their servers waited in the "
                    "trace, where measured (swell run's default); drawn: every wait drawn "
                    "afresh (before 2026-12-01)")
    ap.add_argument("--anchor-think", type=float, default=DEFAULT_ANCHOR_THINK_S,
                    metavar="S",
                    help="a whole session's request after a pause of at least S seconds in "
                    "the trace leaves at its time there (swell run's anchor_think_s, "
                    f"default {DEFAULT_ANCHOR_THINK_S:g}; 0 anchors every request but a "
                    "connection's first)")
    ap.add_argument("--early", choices=("none", "pairs", "connections", "all"), default="none",
                    help="pairs: a whole session's TCP request whose trace response was not "
                    "a reply (the model's pairEarly) leaves at its time without waiting for "
                    "the responses outstanding; connections: every request of a connection "
                    "that had one; all: every request of every connection, at its trace "
                    "time (swell run's early_requests; default none)")
    ap.add_argument("--per-app", action="append", default=[], metavar="NAME:KEY=VALUE",
                    help="one application's own anchor_think_s or early_requests (swell run's "
                    "per_app), e.g. https-tcp:anchor_think_s=0; repeatable")
    ap.add_argument("--acks", choices=("model", "stack"), default="model",
                    help="model: the share of the trace's hosts that ACKed every segment "
                    "does so per application and side (a route with quickack: swell run's "
                    "acks); stack: every host keeps the kernel's delayed ACKs (the tables "
                    "before 2026-12-01 evening)")
    ap.add_argument("--client-match", choices=("link", "none"), default="link",
                    help="link: a whole session (--rre-draw session) goes to a client host "
                    "whose link is nearest its own client's (swell run's default); none: to "
                    "the least loaded client host (before 2026-12-01)")
    ap.add_argument("--cc", choices=CONGESTION_CONTROLS, default="reno",
                    help="TCP congestion control set in every namespace (default reno, as "
                    "`swell run` by default; a new namespace would inherit the host's)")
    ap.add_argument("--rmem", metavar="'MIN DEFAULT MAX'",
                    help="net.ipv4.tcp_rmem in every namespace (a receive-window cap; a "
                    "sensitivity run: docs/fidelity.md)")
    ap.add_argument("--capacity-scale", type=float, default=1.0,
                    help="every access link's capacity times this (a sensitivity run)")
    ap.add_argument("--server-delay-ms", type=float,
                    help="every server's one-way access delay set to this (a sensitivity run)")
    ap.add_argument("--client-rate-mbps", type=float,
                    help="every client's access capacity set to this (a sensitivity run)")
    ap.add_argument("--client-pairing", type=float, default=0.0,
                    help="every client's access link delivers this share of the packets "
                    "queued right behind another together with it (the topology's "
                    "pairing; docs/fidelity.md, 'what 2-8 ms are made of')")
    ap.add_argument("--monitor", choices=("auto", "bottleneck", "clients"), default="auto",
                    help="where the generated traffic is measured: at the bottleneck, or "
                    "beside the clients (what they send before their uplinks, what they "
                    "receive after their downlinks); auto (default): where the trace's "
                    "monitor sat, beside the clients when their median one-way delay from "
                    "it is under 0.5 ms (a capture taken on the users' own machines)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="runs at once, each its own dumbbell (default 1). They share the "
                    "cores: on a 2-core host five at once made web-lan's 16-64 ms octaves "
                    "burstier by up to 1.0 (docs/fidelity.md, 'Runs at once'); measure alone")
    args = ap.parse_args()
    from swell.cli import unwind_on_sigterm

    unwind_on_sigterm()  # kill PID tears the dumbbell down
    global CALIBRATE, RRE_DRAW, CC, RMEM, CAP_SCALE, START, SERVER_DELAY_MS, SERVER_WAIT
    global SERVER_MATCH, CLIENT_MATCH, PAIR_WAIT, CLIENT_RATE_MBPS, MONITOR, ANCHOR_THINK_S, EARLY
    global ACKS, PER_APP, CLIENT_PAIRING
    MONITOR = args.monitor
    for item in args.per_app:
        name, _, setting = item.partition(":")
        key, _, value = setting.partition("=")
        if not (name and key and value):
            print(f"fidelity: --per-app {item!r}: NAME:KEY=VALUE", file=sys.stderr)
            return 2
        PER_APP.setdefault(name, {})[key] = yaml.safe_load(value)
    CALIBRATE = args.calibrate
    START = args.start
    SERVER_WAIT = not args.no_server_wait
    SERVER_MATCH = args.server_match
    CLIENT_MATCH = args.client_match
    PAIR_WAIT = args.pair_wait
    ANCHOR_THINK_S = args.anchor_think
    EARLY = args.early
    ACKS = args.acks
    if ANCHOR_THINK_S < 0:
        print("fidelity: --anchor-think must be 0 or more", file=sys.stderr)
        return 2
    RMEM, CAP_SCALE, SERVER_DELAY_MS = args.rmem, args.capacity_scale, args.server_delay_ms
    CLIENT_RATE_MBPS = args.client_rate_mbps
    if CLIENT_RATE_MBPS is not None and CLIENT_RATE_MBPS <= 0:
        print("fidelity: --client-rate-mbps must be above 0", file=sys.stderr)
        return 2
    if CAP_SCALE <= 0:
        print("fidelity: --capacity-scale must be above 0", file=sys.stderr)
        return 2
    CLIENT_PAIRING = args.client_pairing
    if not 0 <= CLIENT_PAIRING <= 1:
        print("fidelity: --client-pairing must be in [0, 1]", file=sys.stderr)
        return 2
    CC = args.cc
    allowed = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control").read_text().split()
    if CC not in allowed:  # set_tcp would refuse it in the first namespace; say so first
        print(f"fidelity: --cc {CC} cannot be set inside a namespace on this host (allowed: "
              f"{' '.join(allowed)}; net.ipv4.tcp_allowed_congestion_control)", file=sys.stderr)
        return 2
    RRE_DRAW = args.rre_draw
    preps = []
    for cap in CAPTURES:
        if args.only and cap.name not in args.only:
            continue
        missing = [p for p in cap.sources if not p.is_file()]
        if missing or not (cap.sources or cap.path.is_file()):
            print(f"== {cap.name}: skipped, {(missing or [cap.path])[0]} is absent", flush=True)
            continue
        preps.append(prepare(cap, args.out, args.work, args.factor, args.max_run,
                             args.spread_seeds))
    if args.spread_only:
        return 0
    several = args.seeds > 1
    tasks = [(prep, seed) for prep in preps for seed in range(1, args.seeds + 1)]
    results: dict[str, dict[int, FidelityResult]] = {p.cap.name: {} for p in preps}
    if args.jobs > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("fork"))
        futures = [pool.submit(_worker_task, prep, seed, args.out, args.work, several)
                   for prep, seed in tasks]
        try:
            for fut in futures:
                name, seed, res = fut.result()
                results[name][seed] = res
        except BaseException as exc:
            # No run starts after an error or a stop (the pool's own exit would wait for
            # every queued one). `kill PID` or Ctrl-C: the running ones unwind too, their
            # dumbbells torn down, and their workers exit (_worker_task).
            for fut in futures:
                fut.cancel()
            if isinstance(exc, KeyboardInterrupt):
                for proc in multiprocessing.active_children():  # the pool's workers
                    os.kill(proc.pid, signal.SIGTERM)
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown()
    else:
        for prep, seed in tasks:
            name, seed, res = _seed_task(prep, seed, args.out, args.work, several)
            results[name][seed] = res
    if several:
        for name, by_seed in results.items():
            runs = [by_seed[k] for k in sorted(by_seed)]
            summary = seeds_summary(runs, {
                "calibrated": CALIBRATE, "rre_draw": RRE_DRAW, "start": START,
                "server_wait": SERVER_WAIT, "server_match": SERVER_MATCH,
                "client_match": CLIENT_MATCH, "pair_wait": PAIR_WAIT,
                "anchor_think_s": ANCHOR_THINK_S, "early_requests": EARLY,
                "per_app": PER_APP, "acks": ACKS})
            summary["jobs"] = args.jobs
            write_json(args.out / name / "seeds.json", summary)
            text = seeds_table(name, summary)
            print(text, flush=True)
            (args.out / name / "seeds.txt").write_text(text + "\n")
            seeds_plots(args.out / name, runs)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # kill PID or Ctrl-C, after the runs unwound
        print("fidelity: stopped", file=sys.stderr)
        sys.exit(130)
