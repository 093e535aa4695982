"""Unit tests of the link engine's typed config and runner (no root needed).

The dataclasses must reject values the engine's JSON cannot carry, survive a
JSON round trip unchanged (that JSON is what ``swell-link`` reads), and the
runner must turn an engine that fails to start into a one-line
:class:`EnvironmentProblem`. The ranges of link parameters are the topology
spec's (``tests/unit/test_topo_spec.py``); here we check that spec links reach
pipes through ``pipe_from_link`` and that a pipe read back from JSON is held to
the spec's rules. The pipe logic itself is tested in Rust
(``cargo test -p swell-link``).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from swell.errors import EnvironmentProblem, SwellError
from swell.topologies.linkemu import (
    EngineConfig,
    HostLink,
    LinkEngine,
    LossModel,
    PipeSpec,
    PortSpec,
    Route,
    _merge_stats,
    check_pipe,
    link_from_pipe,
    loss_model,
    pipe_from_link,
)
from swell.topologies.spec import LinkDir, Loss


def sample_config(tmp_path: Path) -> EngineConfig:
    ge = LossModel("gilbert", p_gb=0.01, p_bg=0.3, loss_good=0.0, loss_bad=0.9)
    return EngineConfig(
        name="swtest1",
        ports=(PortSpec("left", "/var/run/netns/x", "pa", peer_mac="02:00:00:00:00:01",
                        gateway_ips=("10.1.255.254",)),
               PortSpec("right", "/var/run/netns/x", "pb")),
        routes=(Route("10.1.0.0/16", "left"), Route("10.2.0.0/16", "right")),
        hosts=(HostLink("10.1.0.1", PipeSpec(rate_bps=1e6, delay_us=500, queue_packets=20),
                        PipeSpec(delay_us=500, loss=ge)),),
        port_pipes=(("left", "right", PipeSpec(rate_bps=20e6, queue_bytes=100_000)),),
        captures=(("left", "right", str(tmp_path / "c.pcap")),),
        stats_path=str(tmp_path / "s.jsonl"),
        seed=42,
    )


def test_json_round_trip(tmp_path: Path) -> None:
    cfg = sample_config(tmp_path)
    text = json.dumps(cfg.to_json())
    assert EngineConfig.from_json(json.loads(text)) == cfg
    body = json.loads(text)
    assert body["port_pipes"][0][2]["queue_bytes"] == 100_000
    assert body["hosts"][0]["down"]["loss"]["kind"] == "gilbert"


@pytest.mark.parametrize("build", [
    lambda: LossModel("pareto"),  # the engine would read it as "no loss"
    lambda: LossModel("bernoulli", p=float("nan")),
    lambda: PipeSpec(rate_bps=float("inf")),
    lambda: PipeSpec(rate_bps=True),
    lambda: PipeSpec(delay_us=-1),
    lambda: PipeSpec(delay_us=1.5),
    lambda: PipeSpec(queue_packets=2.5),
    lambda: PipeSpec(queue_bytes=-1),
    lambda: PortSpec("left", "netns-name-not-path", "pa"),
    lambda: PortSpec("left", "/var/run/netns/x", "an-interface-name-too-long"),
    lambda: PortSpec("left", "/var/run/netns/x", "pa", peer_mac="02:00"),
    lambda: PortSpec("left", "/var/run/netns/x", "pa", gateway_ips=("10.1.300.1",)),
    lambda: Route("10.1.0.0/40", "left"),
    lambda: HostLink("host-a", PipeSpec(), PipeSpec()),
])
def test_bad_values_are_rejected(build) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SwellError):
        build()


def test_pipe_from_link_converts_units_only() -> None:
    ge = Loss(kind="gilbert", p_gb=0.01, p_bg=0.3, loss_good=0.0, loss_bad=0.9)
    link = LinkDir(rate_mbps=20, delay_ms=1.2345, queue_bytes=100_000, loss=ge)
    pipe = pipe_from_link(link)
    assert pipe == PipeSpec(rate_bps=20e6, delay_us=1234, queue_bytes=100_000,
                            loss=LossModel("gilbert", p_gb=0.01, p_bg=0.3, loss_good=0.0,
                                           loss_bad=0.9))
    assert pipe.delay_us == link.delay_us and pipe.rate_bps == link.rate_bps
    assert pipe_from_link(LinkDir()) == PipeSpec()  # defaults agree: no limit, no loss
    assert loss_model(Loss.model_validate(0.01)) == LossModel("bernoulli", p=0.01)
    back = link_from_pipe(pipe)
    assert (back.rate_mbps, back.delay_ms, back.queue_bytes, back.loss) == (20, 1.234, 100_000, ge)
    paired = pipe_from_link(LinkDir(rate_mbps=10, pairing=0.17))
    assert paired.pairing == 0.17 and link_from_pipe(paired).pairing == 0.17


# What a link may be is the spec's rule (its equivalents are in test_topo_spec.py);
# these pipes are well-formed JSON, but no spec describes them.
NOT_A_LINK = [
    (PipeSpec(loss=LossModel("bernoulli", p=1.5)), "loss.p"),
    (PipeSpec(loss=LossModel("gilbert", p_gb=0.1, p_bg=0.0)), "p_bg > 0"),
    (PipeSpec(rate_bps=0), "rate_mbps"),
    (PipeSpec(rate_bps=-5.0), "rate_mbps"),
    (PipeSpec(queue_bytes=9000, queue_packets=10), "not both"),
    (PipeSpec(queue_packets=0), "queue_packets"),
    (PipeSpec(pairing=1.5), "pairing"),
    (PipeSpec(pairing=-0.1), "pairing"),
]


@pytest.mark.parametrize(("pipe", "message"), NOT_A_LINK)
def test_pipes_are_held_to_the_spec(pipe: PipeSpec, message: str) -> None:
    with pytest.raises(SwellError, match="my pipe: not a valid link") as err:
        check_pipe(pipe, "my pipe")
    assert message in err.value.message


@pytest.mark.parametrize(("pipe", "message"), NOT_A_LINK)
def test_json_read_back_is_held_to_the_spec(tmp_path: Path, pipe: PipeSpec,
                                            message: str) -> None:
    body = json.loads(json.dumps(sample_config(tmp_path).to_json()))
    body["port_pipes"][0][2] = json.loads(json.dumps(asdict(pipe)))
    with pytest.raises(SwellError, match="engine config port pipe left->right") as err:
        EngineConfig.from_json(body)
    assert message in err.value.message
    body = json.loads(json.dumps(sample_config(tmp_path).to_json()))
    body["hosts"][0]["up"] = json.loads(json.dumps(asdict(pipe)))
    with pytest.raises(SwellError, match="engine config host 10.1.0.1 up"):
        EngineConfig.from_json(body)


def test_engine_config_cross_checks(tmp_path: Path) -> None:
    cfg = sample_config(tmp_path)
    port = cfg.ports[0]
    with pytest.raises(SwellError, match="unknown port"):
        EngineConfig(name="r", ports=(port,), routes=(Route("0.0.0.0/0", "nowhere"),))
    with pytest.raises(SwellError, match="unique"):
        EngineConfig(name="r", ports=(port, port), routes=())
    with pytest.raises(SwellError, match="twice"):
        EngineConfig(name="r", ports=(port,), routes=(), hosts=cfg.hosts * 2)
    with pytest.raises(SwellError, match="port pipe"):
        EngineConfig(name="r", ports=(port,), routes=(), captures=(("left", "left", "x"),))
    with pytest.raises(SwellError, match="run name"):
        EngineConfig(name="bad name", ports=(port,), routes=())


def test_merge_stats_keeps_latest_per_pipe_and_queue_history() -> None:
    acc: dict = {}
    rec = {"t": 0.1, "ports": {}, "captures": {},
           "pipes": {"port:a>b": {"queue_bytes": 10, "queue_packets": 1, "peak_queue_bytes": 20},
                     "up:10.0.0.1": {"packets": 3}}}
    _merge_stats(acc, rec)
    rec2 = {"t": 0.2, "final": True, "ports": {}, "captures": {},
            "pipes": {"port:a>b": {"queue_bytes": 0, "queue_packets": 0, "peak_queue_bytes": 5}}}
    _merge_stats(acc, rec2)
    assert acc["pipes"]["up:10.0.0.1"] == {"packets": 3}
    assert acc["queue_samples"]["port:a>b"] == [(0.1, 10, 1, 20), (0.2, 0, 0, 5)]
    assert acc["final"] is True


def test_engine_start_failure_is_one_line(tmp_path: Path) -> None:
    try:
        from swell.native import native_artifact

        native_artifact("swell-link")
    except EnvironmentProblem as exc:
        pytest.skip(str(exc))
    cfg = sample_config(tmp_path)  # its namespace path does not exist
    eng = LinkEngine(cfg, tmp_path, die_with_parent=False, rt_priority=None)
    assert "--name" in eng.argv() and "swtest1" in eng.argv()
    with pytest.raises(EnvironmentProblem, match="engine failed to start: swell-link: "):
        eng.start(timeout=10)
    assert eng.proc is None


def test_threads_option_reaches_the_engine(tmp_path: Path) -> None:
    cfg = sample_config(tmp_path)
    assert "--threads" not in LinkEngine(cfg, tmp_path).argv()
    argv = LinkEngine(cfg, tmp_path, threads=2).argv()
    assert argv[argv.index("--threads") + 1] == "2"
    assert argv[-1].endswith("-link.json")
    with pytest.raises(SwellError, match="threads"):
        LinkEngine(cfg, tmp_path, threads=3)
