"""RPS sessions: the plan follows the MMPP's mean and the options; the kind's options;
a missing Apache stops the run before the topology is up (exit 3, naming the package)."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest
from pydantic import ValidationError

from swell.errors import EnvironmentProblem
from swell.extract.mmpp import MMPPModel, Scale
from swell.generators.rps import RpsKind, RpsSpec, session_plan
from swell.generators.web import APACHE_BIN
from swell.placement import HostNeeds


def _model() -> MMPPModel:
    scales = [Scale(math.exp(-1 / tau), pi * (1 - pi) * r * r, pi, r)
              for tau, pi, r in ((60.0, 0.3, 8.0), (5.0, 0.5, 4.0))]
    return MMPPModel(10.0, scales, np.array([2.0, 6.0]), np.array([0.6, 0.4]))


def test_plan_follows_the_mmpp_and_the_options() -> None:
    m = _model()
    spec = RpsSpec(kind="rps", model="m", interval_s=0.5, scale=2.5, requests=4.0,
                   think_s=2.0, object_bytes=[1000, 5000])
    srcs = [f"10.0.0.{i}" for i in range(1, 41)]
    plan = session_plan(spec, m, 2000.0, srcs, seed=3)
    # mean arrivals per interval times 2.5, intervals of 0.5 s
    expect = m.mean() * 2.5 * 2000.0 / 0.5
    assert abs(len(plan) / expect - 1) < 0.1
    t = np.array([s["t"] for s in plan])
    assert np.all(np.diff(t) >= 0) and t.max() < 2000.0
    assert {s["src"] for s in plan} == set(srcs)
    nreq = np.array([len(s["reqs"]) for s in plan])
    assert abs(nreq.mean() / 4.0 - 1) < 0.05 and nreq.min() >= 1
    thinks = np.array([k for s in plan for _, k in s["reqs"]])
    assert abs(thinks.mean() / 2.0 - 1) < 0.05
    assert {p for s in plan for p, _ in s["reqs"]} == {"obj_1000", "obj_5000"}
    # bursty: counts per interval more variable than Poisson
    c = np.bincount((t // 0.5).astype(int))
    assert c.var() > 1.5 * c.mean()


def test_spec_and_needs() -> None:
    with pytest.raises(ValidationError):
        RpsSpec(kind="rps")  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        RpsSpec(kind="rps", model="m", clients=0)
    k = RpsKind(RpsSpec(kind="rps", model="m", clients=64))
    assert k.needs() == HostNeeds(clients=k.needs().clients, servers=k.needs().servers)
    assert k.needs().clients is not None and k.needs().clients.count == 64


def test_missing_apache_is_exit_3_naming_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda p, *a, **k: None if p == APACHE_BIN else
                        real(p, *a, **k))
    with pytest.raises(EnvironmentProblem) as err:
        RpsKind(RpsSpec(kind="rps", model="m")).check()  # what swell run calls first
    assert err.value.exit_code == 3 and err.value.where == APACHE_BIN
    assert "apt-get install apache2" in str(err.value)
