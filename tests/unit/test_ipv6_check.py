"""``swell check`` refuses kinds that cannot run over IPv6 before anything runs.

A topology's address plan reaches the kinds as ``PathFacts.family`` (4 or 6);
the bandwidth estimators (swell-probe's receiver reads ``sockaddr_in``, pathload
and pathChirp are IPv4 tools) refuse an IPv6 plan in their ``check_path`` with
one line naming the kind. Every other registered kind passes ``swell check`` on
an IPv6 file; ``tcpreplay`` translates an IPv4 trace there (a warning says so)
and refuses, in one line, the other way round: an IPv6-only trace on an IPv4
plan. No root: check builds no topology.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from swell.errors import SwellError
from swell.experiments.check import check_experiment
from swell.generators import registry
from swell.placement import PathFacts
from swell.topologies.placement import path_facts
from swell.topologies.spec import spec_from_dict

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "data" / "pcap" / "example.pcap"
V6, V4 = "fd00:5e12::/48", "10.79.0.0/16"

# kinds that refuse IPv6 and one valid option set of each
REFUSING = {
    ("foreground", "slops"): {"kind": "slops"},
    ("foreground", "chirp"): {"kind": "chirp"},
    ("foreground", "pathload"): {"kind": "pathload"},
    ("foreground", "pathchirp"): {"kind": "pathchirp"},
}
# kinds that run over IPv6 (docs/ipv6.md) whose options need no fitted model
ALLOWED_BG = [
    {"kind": "none"},
    {"kind": "swing", "trace": str(TRACE), "variant": {"target_mbps": 3}},
    {"kind": "cbr", "proto": "udp", "rate_mbps": 3},
    {"kind": "poisson", "proto": "tcp", "rate_mbps": 3},
    {"kind": "upb", "trace": str(TRACE), "target_mbps": 3},
    {"kind": "tpb", "trace": str(TRACE), "target_mbps": 3},
    {"kind": "packets", "preset": "DNS"},
    {"kind": "fixed_loss", "loss": 0.01},
    {"kind": "tcpreplay", "trace": str(TRACE), "target_mbps": 2},
]
ALLOWED_FG = [
    {"kind": "none"},
    {"kind": "httperf", "object_bytes": 100000},
    {"kind": "bulk"},
    {"kind": "video", "rate_kbps": 450, "fps": 30, "duration_s": 5, "buffer_s": 2,
     "transport": "rtp"},
]


def flow(d: dict) -> str:
    """A dict as YAML flow style (JSON is YAML)."""
    import json

    return json.dumps(d)


def experiment(tmp: Path, network: str, background: dict, foreground: dict) -> Path:
    path = tmp / "exp.yaml"
    path.write_text(
        "name: v6check\nseed: 1\nduration_s: 5\nwarmup_s: 1\n"
        "topology:\n"
        f"  network: \"{network}\"\n"
        "  bottleneck: {rate_mbps: 20, delay_ms: 10, queue_bytes: 100000}\n"
        "  clients: {count: 4}\n  servers: {count: 2}\n"
        "  foreground: {clients: 1, servers: 1}\n"
        f"background: {flow(background)}\nforeground: {flow(foreground)}\n")
    return path


def test_path_facts_carry_the_plan_family() -> None:
    base = {"bottleneck": {"rate_mbps": 10}}
    assert path_facts(spec_from_dict({**base, "network": V6})).family == 6
    assert path_facts(spec_from_dict({**base, "network": V4})).family == 4
    assert PathFacts().family == 4


@pytest.mark.parametrize(("role", "name"), sorted(REFUSING))
def test_check_refuses_ipv4_only_kind_on_ipv6(tmp_path: Path, role: str, name: str) -> None:
    opts = REFUSING[(role, name)]
    bg = opts if role == "background" else {"kind": "none"}
    fg = opts if role == "foreground" else {"kind": "none"}
    with pytest.raises(SwellError) as info:
        check_experiment(experiment(tmp_path, V6, bg, fg))
    line = info.value.one_line()
    assert "\n" not in line
    assert f"{name}: cannot run over IPv6" in line, line
    assert str(tmp_path / "exp.yaml") in line
    # the same file on an IPv4 plan passes: the refusal is the family's
    check_experiment(experiment(tmp_path, V4, bg, fg))


def test_refusing_kinds_are_registered() -> None:
    for role, name in REFUSING:
        assert name in registry.kinds(role)  # type: ignore[arg-type]


# kinds whose options need a fitted model: checked on PathFacts directly
MODEL_KINDS = [{"kind": "harpoon", "model": "m"}, {"kind": "rps", "model": "m"}]


def test_every_registered_kind_is_classified_for_ipv6() -> None:
    """Each kind's check_path on an IPv6 path: the refusing ones raise one line naming
    the kind, every other one does not refuse the family (a new kind must be listed)."""
    allowed = {("background", d["kind"]): d for d in [*ALLOWED_BG, *MODEL_KINDS]}
    allowed |= {("foreground", d["kind"]): d for d in ALLOWED_FG}
    v6 = PathFacts(forward_mbps=20, reverse_mbps=20, family=6)
    for role in ("background", "foreground"):
        for name, cls in registry.kinds(role).items():  # type: ignore[arg-type]
            key = (role, name)
            assert key in REFUSING or key in allowed, f"{key} not classified for IPv6"
            kind = cls(cls.Spec.model_validate(REFUSING.get(key) or allowed[key]))
            if key in REFUSING:
                with pytest.raises(SwellError, match=f"^{name}: cannot run over IPv6: "):
                    kind.check_path(v6)
            else:
                try:
                    kind.check_path(v6)
                except SwellError as exc:
                    assert "IPv6" not in str(exc), exc
                except Exception:  # noqa: BLE001, S110 - needs prepare(); check skips it too
                    pass


@pytest.mark.parametrize("bg", ALLOWED_BG, ids=lambda d: d["kind"])
def test_check_passes_ipv6_background(tmp_path: Path, bg: dict) -> None:
    check_experiment(experiment(tmp_path, V6, bg, {"kind": "httperf"}))


@pytest.mark.parametrize("fg", ALLOWED_FG, ids=lambda d: d["kind"])
def test_check_passes_ipv6_foreground(tmp_path: Path, fg: dict) -> None:
    check_experiment(experiment(tmp_path, V6, {"kind": "poisson", "proto": "udp",
                                              "rate_mbps": 3}, fg))


def test_cli_check_fails_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from swell.cli import main

    path = experiment(tmp_path, V6, {"kind": "none"}, {"kind": "slops"})
    try:
        code = main(["check", str(path)])
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert "slops: cannot run over IPv6" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err


def test_tcpreplay_on_the_other_family(tmp_path: Path) -> None:
    """An IPv6-only trace on an IPv4 plan is refused in one line (tcprewrite maps within
    a family; 6 to 4 is not translated), passes on IPv6; an IPv4 trace on an IPv6 plan
    passes with a warning saying its packets are translated."""
    from swell.generators.kind import PrepareContext
    from tests.unit.test_replay_ipv6 import write_v6_trace

    trace = write_v6_trace(tmp_path / "v6only.pcap")
    bg = {"kind": "tcpreplay", "trace": str(trace), "target_mbps": 2}
    with pytest.raises(SwellError) as info:
        check_experiment(experiment(tmp_path, V4, bg, {"kind": "none"}))
    line = info.value.one_line()
    assert "\n" not in line and "tcpreplay: cannot run over IPv4" in line, line
    check_experiment(experiment(tmp_path, V6, bg, {"kind": "none"}))
    kind = registry.make("background", registry.kinds("background")["tcpreplay"].Spec
                         .model_validate({"kind": "tcpreplay", "trace": str(TRACE)}))
    kind.prepare(PrepareContext(tmp_path, tmp_path, 1))
    notes = kind.check_path(PathFacts(forward_mbps=20, reverse_mbps=20, family=6))
    assert len(notes) == 1 and "translated to IPv6" in notes[0], notes
    assert kind.check_path(PathFacts(forward_mbps=20, reverse_mbps=20, family=4)) == []


def test_cli_check_prints_what_a_run_would_warn(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """swell check passes an IPv4 trace replayed on an IPv6 plan and says, as a run would,
    that its packets are translated; a refusal names the part's line, not the topology's."""
    from swell.cli import main

    bg = {"kind": "tcpreplay", "trace": str(TRACE), "target_mbps": 2}
    assert main(["check", str(experiment(tmp_path, V6, bg, {"kind": "none"}))]) == 0
    captured = capsys.readouterr()
    assert "ok:" in captured.out
    assert "warning: background: tcpreplay:" in captured.err
    assert "translated to IPv6" in captured.err
    path = experiment(tmp_path, V6, {"kind": "none"}, {"kind": "slops"})
    with pytest.raises(SwellError) as info:
        check_experiment(path)
    line_no = next(i for i, ln in enumerate(path.read_text().splitlines(), 1)
                   if ln.startswith("foreground"))
    assert info.value.where == f"{path}:{line_no}", info.value.one_line()
