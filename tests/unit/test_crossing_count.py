"""The netem timing checks' crossing count (``tests/integration/netem_timing.py``):
a round trip that crosses six leaves once each passes; a leaf crossed twice, an
extra leaf, or most replies missing fail, whatever the timing."""

from __future__ import annotations

import pytest

from tests.integration import netem_timing as nt

PATH = ["a up", "bottleneck forward", "b down", "b up", "bottleneck reverse", "a down"]


def check(per_ping: dict[str, int], answered: int, count: int = 40, noise: int = 0) -> None:
    """Leaves moved by ``per_ping`` packets per answered ping (the first leaf also by
    the unanswered requests), plus ``noise`` packets on the first leaf."""
    state = {leaf: 100 for leaf in [*PATH, "c up", "c down"]}

    def ping(n: int) -> int:
        for leaf, k in per_ping.items():
            state[leaf] += k * answered
        state[PATH[0]] += n - answered + noise
        return answered

    nt.assert_crossed_once("a <-> b", lambda: dict(state), ping, count)


def test_six_leaves_once_each_pass():
    check(dict.fromkeys(PATH, 1), 40)
    check(dict.fromkeys(PATH, 1), 40, noise=nt.CROSS_SLACK)  # ARP
    check(dict.fromkeys(PATH, 1), 31)  # replies lost, each request counted once


def test_a_leaf_crossed_twice_fails():
    with pytest.raises(AssertionError, match="crossed twice"):
        check({**dict.fromkeys(PATH, 1), "b down": 2}, 40)


def test_an_extra_leaf_fails():
    with pytest.raises(AssertionError):
        check({**dict.fromkeys(PATH, 1), "c up": 1}, 40)


def test_most_replies_missing_fails():
    with pytest.raises(AssertionError, match="answered"):
        check(dict.fromkeys(PATH, 1), 20)
