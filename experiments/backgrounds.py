"""From an experiment's background spec to models, topology groups and a generator.

The experiment file says *what* background to run (``BackgroundSpec``); this
module turns that into the pieces the runner drives:

* :func:`prepare_model` extracts a Swing model from a trace once (cached by the
  trace's hash under the study directory) and applies the variant (RSP x k,
  HB constant RTT, zero think time, capped access links, then session scaling
  or scaling to a target rate), saved as its own model directory so the run
  directory keeps exactly what was replayed;
* :func:`topology_for` fills the background host groups of the topology spec:
  for Swing the access links are drawn from the (variant) model; for the open
  loop baselines one client and one server on unconstrained links; for no
  background and fixed loss none (fixed loss sets the bottleneck's loss rate);
* :func:`make_background` builds the generator (``swell.generators``) placed on
  the topology's nodes, or ``None`` when nothing is generated.

Direction: the foreground downloads flow server side -> client side (the
bottleneck's "reverse"), so CBR/Poisson senders sit on the server side and
their receivers on the client side, competing with the downloads as in the
study.
"""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from typing import Any

from swell.errors import SwellError
from swell.experiments.schema import BackgroundSpec, VariantSpec
from swell.generators.base import Generator, host_place

DEFAULT_SWING_CLIENTS = 50
DEFAULT_SWING_SERVERS = 10


def _hash_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def base_model(bg: BackgroundSpec, cache: Path, base_dir: Path) -> Path | None:
    """The model directory a background starts from (extracting a trace once).

    Relative ``model``/``trace`` paths are relative to the experiment file's folder.
    """
    from swell.extract.cli import extract_model
    from swell.extract.model import save_model

    if bg.kind != "swing" and not bg.match_model:
        return None
    if bg.model:
        model = base_dir / bg.model
        if not (model / "model.json").is_file():
            raise SwellError(model, "not a swell model directory")
        return model
    if not bg.trace:
        return None
    trace = base_dir / bg.trace
    if not trace.is_file():
        raise SwellError(trace, "no such trace")
    dest = cache / f"model-{_hash_file(trace)}"
    if not (dest / "model.json").is_file():
        save_model(extract_model(trace, label=f"extract {trace.name}"), dest)
    return dest


def apply_variant(model_dir: Path, variant: VariantSpec | None, cache: Path) -> Path:
    """The variant of a model, saved beside the others (same inputs, same directory)."""
    from swell.extract import variants as v
    from swell.extract.model import load_model, save_model

    if variant is None or variant == VariantSpec():
        return model_dir
    key = hashlib.sha1(
        (str(model_dir.resolve()) + variant.model_dump_json()).encode()
    ).hexdigest()[:12]
    dest = cache / f"variant-{key}"
    if (dest / "model.json").is_file():
        return dest
    m = v.apply(load_model(model_dir), scale=variant.scale, target_mbps=variant.target_mbps,
                rsp=variant.rsp, hb_rtt_ms=variant.hb_rtt_ms, zero_think_times=variant.zero_think,
                cap_mbps=variant.cap_mbps)
    save_model(m, dest)
    return dest


def model_rate_bps(model_dir: Path) -> float:
    """The model's mean rate server -> client (the direction the downloads compete in).

    Payload bytes the servers sent over the trace's duration, times the model's rate scale:
    what a CBR or Poisson background must carry to match the Swing background's load.
    """
    from swell.extract.model import load_model

    m = load_model(model_dir)
    scale = float(m.meta.get("rate_scale", 1.0))
    s2c = sum(a["bytes_s2c"] for a in m.meta["apps"].values())
    return 8.0 * s2c * scale / max(m.duration_s, 1e-9)


def topology_for(topology: dict[str, Any], bg: BackgroundSpec, model: Path | None
                 ) -> dict[str, Any]:
    """The topology spec of one run: background groups filled in for its background."""
    topo = copy.deepcopy(topology)
    for side, default in (("clients", DEFAULT_SWING_CLIENTS), ("servers", DEFAULT_SWING_SERVERS)):
        group = dict(topo.get(side) or {})
        explicit = "access" in group or "model" in group
        if bg.kind == "swing":
            if not explicit:
                if model is None:
                    raise SwellError("background", "swing needs a model")
                group.setdefault("count", default)
                group["model"] = {"path": str(model), "side": side[:-1]}
        elif bg.kind in ("none", "fixed_loss"):
            group = {"count": 0}
        elif not explicit:
            group = {"count": 1, "access": {}}
        topo[side] = group
    if bg.kind == "fixed_loss":
        bn = dict(topo.get("bottleneck") or {})
        bn["loss"] = float(bg.loss or 0.0)
        if isinstance(bn.get("reverse"), dict):
            bn["reverse"] = {**bn["reverse"], "loss": float(bg.loss or 0.0)}
        topo["bottleneck"] = bn
    return topo


def check_rate(bg: BackgroundSpec, topology: dict[str, Any], model: Path | None) -> None:
    """An open-loop background at or above the bottleneck's rate is an error, not a study."""
    if bg.kind not in ("cbr", "poisson"):
        return
    rate = bg.rate_mbps if bg.rate_mbps is not None else (
        model_rate_bps(model) / 1e6 if model is not None else None)
    bn = (topology.get("bottleneck") or {})
    cap = bn.get("rate_mbps")
    rev = (bn.get("reverse") or {}).get("rate_mbps", cap)
    if rate is not None and rev is not None and rate >= float(rev):
        raise SwellError("background", f"{bg.display()} sends {rate:g} Mbit/s, at or above the "
                         f"bottleneck's {float(rev):g} Mbit/s: it would only measure the queue")


def make_background(bg: BackgroundSpec, topo: Any, model: Path | None, out: Path,
                    duration_s: float, seed: int, base_dir: Path = Path("."),
                    warmup_s: float = 0.0) -> Generator | None:
    """The background generator of a run, placed on the topology, or None.

    Playback (UPB over UDP, TPB over one TCP connection) sends the trace's server-side
    packet schedule from the first background server to the first client with D-ITG;
    tcpreplay replays the whole trace with its addresses rewritten into the topology.
    Both last as long as the trace (or the run, whichever is shorter).
    """
    if bg.kind in ("none", "fixed_loss"):
        return None
    if bg.kind == "swing":
        target = bg.variant.target_mbps if bg.variant is not None else None
        return _swing(topo, model, out, duration_s, seed, target, warmup_s)
    if bg.kind in ("cbr", "poisson"):
        return _cbr(bg, topo, model, out, duration_s, seed)
    trace = base_dir / str(bg.trace)
    if bg.kind in ("upb", "tpb"):
        from swell.generators.playback import playback_for_topology

        return playback_for_topology(topo, trace, out, proto="udp" if bg.kind == "upb" else "tcp",
                                     direction="server", duration_s=duration_s)
    if bg.kind == "tcpreplay":
        from swell.generators.replay import replay_for_topology

        return replay_for_topology(topo, trace, out, duration_s=duration_s)
    raise SwellError("background", f"{bg.kind!r} is not a background swell can run")


def offered_mbps(sched: Any, start_s: float = 0.0, end_s: float | None = None) -> float:
    """Payload both ways of the connections scheduled to start in ``[start_s, end_s)``.

    A connection's scheduled start is its session's arrival plus the think times of the
    RREs before it plus its offset in the RRE (transfer times are not known in advance,
    so this is a lower bound of when it really starts).
    """
    end = sched.duration_s if end_s is None else end_s
    total = 0
    for sess in sched.sessions:
        t = sess.t
        for rre in sess.rres:
            t += rre.gap
            for c in rre.conns:
                if start_s <= t + c.offset < end:
                    total += sum(q + a for q, a, _ in c.pairs)
    return 8.0 * total / max(end - start_s, 1e-9) / 1e6


def calibrated_schedule(apps: list[Any], clients: list[str], servers: list[str],
                        duration_s: float, seed: int, scale: float, target_mbps: float | None,
                        tolerance: float = 0.10, tries: int = 50, window_start_s: float = 0.0
                        ) -> Any:
    """A schedule whose offered load is close to the target (rejection sampling on the seed).

    Swing's per-session sizes are heavy-tailed, so a short run's offered load can be far
    from the model's mean (a run of a minute may draw none of the few huge responses, or
    several). When the experiment asks for a target rate, schedules are drawn with
    candidate seeds derived from (seed, k) and the first one within ``tolerance`` of
    the target is used (else the closest of ``tries``): deterministic for a seed,
    different for different seeds (repetitions), and recorded in the schedule's
    metadata. The load is measured over the measurement window (connections scheduled
    to start after ``window_start_s``, the warm-up). Without a target the first draw
    is used as it is.
    """
    import numpy as np

    from swell.generators.schedule import build_schedule

    best, best_err = None, float("inf")
    for k in range(tries if target_mbps else 1):
        cand = seed if k == 0 else int(np.random.SeedSequence([seed, k]).generate_state(1)[0])
        sched = build_schedule(apps, clients, servers, duration_s, cand, scale=scale)
        if not target_mbps:
            return sched
        err = abs(offered_mbps(sched, window_start_s) / target_mbps - 1.0)
        if err < best_err:
            best, best_err = sched, err
        if err <= tolerance:
            break
    best.meta.update({"target_mbps": target_mbps,
                      "offered_mbps": offered_mbps(best, window_start_s),
                      "calibration_seed": best.seed, "calibration_base_seed": seed})
    return best


def _swing(topo: Any, model: Path | None, out: Path, duration_s: float, seed: int,
           target_mbps: float | None = None, warmup_s: float = 0.0) -> Generator:
    from swell.generators.schedule import load_app_samples, write_schedule
    from swell.generators.swing import SwingConfig, SwingGenerator, host_groups

    if model is None:
        raise SwellError("background", "swing needs a model")
    apps, scale = load_app_samples(model)
    clients = [h.ip for h in topo.clients]
    servers = [h.ip for h in topo.servers]
    sched = calibrated_schedule(apps, clients, servers, duration_s, seed, scale, target_mbps,
                                window_start_s=warmup_s)
    path = write_schedule(out / "schedule.jsonl", sched)
    # One swell-gen per namespace: emulated hosts are multiplexed onto a few namespaces,
    # and a socket can only bind an address of its own namespace.
    return SwingGenerator(SwingConfig(
        schedule=path, out_dir=out,
        server=host_place(topo, topo.servers[0]), client=host_place(topo, topo.clients[0]),
        server_groups=host_groups(topo, topo.servers),
        client_groups=host_groups(topo, topo.clients),
        duration_s=duration_s,
    ))



def _cbr(bg: BackgroundSpec, topo: Any, model: Path | None, out: Path, duration_s: float,
         seed: int) -> Generator:
    from swell.generators.cbr import CbrConfig, CbrGenerator

    if bg.rate_mbps is not None:
        rate = bg.rate_mbps * 1e6
    elif model is not None:
        rate = model_rate_bps(model)
    else:
        raise SwellError("background", f"{bg.kind} needs rate_mbps or a model to match")
    receiver, sender = topo.clients[0], topo.servers[0]
    return CbrGenerator(CbrConfig(
        dst=receiver.ip, src=sender.ip, rate_bps=rate, out_dir=out, proto=bg.proto,
        dist="const" if bg.kind == "cbr" else "poisson", duration_s=duration_s,
        server=host_place(topo, receiver), client=host_place(topo, sender), seed=seed,
        size=1400 if bg.proto == "udp" else 1448,
    ))
