"""The explicit table of traffic kinds: ``kind:`` in an experiment file -> implementation.

One line per kind. ``swell run``, ``swell check`` and the experiment schema
find kinds only here (:func:`kinds`, :func:`kind_class`, :func:`make`); a
kind's module holds its options (``Spec``), its processes (a
:class:`~swell.generators.base.Generator`) and its results. Adding a kind is
one module plus one line below (``docs/adding-a-traffic-kind.md``).
"""

from __future__ import annotations

from swell.errors import SwellError
from swell.generators.bulk import BulkKind
from swell.generators.bwest import ChirpKind, PathchirpKind, PathloadKind, SlopsKind
from swell.generators.cbr import CbrKind, PoissonKind
from swell.generators.harpoon import HarpoonKind
from swell.generators.kind import KindSpec, Role, TrafficKind
from swell.generators.nothing import FixedLoss, NoBackground, NoForeground
from swell.generators.packets import PacketsKind
from swell.generators.playback import TpbKind, UpbKind
from swell.generators.replay import ReplayKind
from swell.generators.rps import RpsKind
from swell.generators.swing import SwingKind
from swell.generators.video import VideoKind
from swell.generators.web import HttperfKind

BACKGROUNDS: dict[str, type[TrafficKind]] = {
    "none": NoBackground,
    "swing": SwingKind,
    "harpoon": HarpoonKind,
    "cbr": CbrKind,
    "poisson": PoissonKind,
    "upb": UpbKind,
    "tpb": TpbKind,
    "tcpreplay": ReplayKind,
    "packets": PacketsKind,
    "rps": RpsKind,
    "fixed_loss": FixedLoss,
}

FOREGROUNDS: dict[str, type[TrafficKind]] = {
    "none": NoForeground,
    "httperf": HttperfKind,
    "bulk": BulkKind,
    "slops": SlopsKind,
    "chirp": ChirpKind,
    "pathload": PathloadKind,
    "pathchirp": PathchirpKind,
    "video": VideoKind,
}

TABLES: dict[Role, dict[str, type[TrafficKind]]] = {
    "background": BACKGROUNDS, "foreground": FOREGROUNDS,
}


def kinds(role: Role) -> dict[str, type[TrafficKind]]:
    """The kinds of one role, name -> class, in table order."""
    return TABLES[role]


def kind_class(role: Role, name: str) -> type[TrafficKind]:
    table = TABLES[role]
    if name not in table:
        raise SwellError(role, f"{name!r} is not a {role} kind (known: {', '.join(table)})")
    return table[name]


def make(role: Role, spec: KindSpec) -> TrafficKind:
    """The kind object for one validated spec."""
    return kind_class(role, spec.kind)(spec)


def spec_models(role: Role) -> tuple[type[KindSpec], ...]:
    """The option models of one role (the experiment schema's tagged union)."""
    return tuple(dict.fromkeys(k.Spec for k in TABLES[role].values()))


def cli_modules() -> list[str]:
    """Modules with ``add_parsers(subparsers)`` for ``swell gen``, one per kind that has one."""
    names = [k.cli for table in TABLES.values() for k in table.values() if k.cli]
    return list(dict.fromkeys(names))
