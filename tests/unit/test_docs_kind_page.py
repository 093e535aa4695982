"""``docs/adding-a-traffic-kind.md`` stays true to the code.

* Its table of pieces names every public attribute and method of
  :class:`~swell.generators.kind.TrafficKind` (found by introspecting the class
  and an instance), and nothing the class no longer has.
* The ``Generator`` methods it names exist.
* Every Python block is real code: it appears verbatim (up to indentation) in
  the file the text just before it names.

The checks run on the page's text, so each is also shown to fail on an edited
copy of the page.
"""

from __future__ import annotations

import inspect
import re
import textwrap
from pathlib import Path

from swell.generators.base import Generator
from swell.generators.kind import KindSpec, TrafficKind

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "adding-a-traffic-kind.md"
TABLE_HEADING = "## The pieces of a kind"
GENERATOR_PARAGRAPH = "The `Generator` is the process-level half"
IDENT = re.compile(r"^([A-Za-z_]\w*)")
BLOCK = re.compile(r"^( *)```python\n(.*?)^\1```$", re.S | re.M)
PATH = re.compile(r"`([\w/]+\.py)`")


def public_names() -> set[str]:
    """What a kind has that a kind's author sees: class attributes and methods (also
    those only declared, such as ``name``), and what ``__init__`` sets."""
    names = {n for klass in TrafficKind.__mro__ if klass is not object for n in vars(klass)}
    names |= set(inspect.get_annotations(TrafficKind))
    names |= set(vars(TrafficKind(KindSpec(kind="x"))))
    return {n for n in names if not n.startswith("_")}


def table_names(page: str) -> set[str]:
    """The names in the first column of the page's table of pieces."""
    assert TABLE_HEADING in page, f"{PAGE}: no section {TABLE_HEADING!r}"
    section = page.split(TABLE_HEADING, 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("|")][2:]  # head, rule
    names = set()
    for row in rows:
        first = row.split("|")[1]
        for span in re.findall(r"`([^`]+)`", first):
            m = IDENT.match(span)
            assert m, f"{PAGE}: {span!r} in the table of pieces is not a name"
            names.add(m.group(1))
    return names


def table_mismatch(page: str) -> tuple[set[str], set[str]]:
    """(on the class but not on the page, on the page but not on the class)."""
    have, named = public_names(), table_names(page)
    return have - named, named - have


def generator_names(page: str) -> set[str]:
    """The ``name(...)`` calls in the page's paragraph on the Generator."""
    assert GENERATOR_PARAGRAPH in page, f"{PAGE}: no paragraph on the Generator"
    para = page.split(GENERATOR_PARAGRAPH, 1)[1].split("\n\n", 1)[0]
    return set(re.findall(r"`(?:self\.)?([A-Za-z_]\w*)\(", para))


def unquoted_blocks(page: str) -> list[str]:
    """Python blocks not found verbatim in the file named just before them."""
    bad = []
    for m in BLOCK.finditer(page):
        code = textwrap.dedent(m.group(2))
        before = PATH.findall(page[:m.start()].rstrip().rsplit("\n\n", 1)[-1])
        if not before:
            bad.append(f"a block with no file named before it: {code.splitlines()[0]!r}")
            continue
        source = (REPO / before[-1]).read_text()
        if not any(textwrap.indent(code, " " * k) in source for k in range(0, 13, 4)):
            bad.append(f"{before[-1]} has no {code.splitlines()[0]!r} block as quoted")
    return bad


def test_the_table_names_every_public_piece_of_a_kind() -> None:
    missing, stale = table_mismatch(PAGE.read_text())
    assert not missing, f"{PAGE}: TrafficKind has {sorted(missing)}, the table does not"
    assert not stale, f"{PAGE}: the table names {sorted(stale)}, TrafficKind has no such"


def test_the_introspection_sees_declared_and_instance_attributes() -> None:
    names = public_names()
    assert {"name", "role", "Spec", "spec", "tools", "report", "validate"} <= names
    assert not any(n.startswith("_") for n in names)


def test_a_page_that_drifts_is_caught() -> None:
    page = PAGE.read_text()
    rows = page.splitlines(True)
    without = "".join(r for r in rows if not r.startswith("| `asked_mbps()`"))
    assert table_mismatch(without) == ({"asked_mbps"}, set())
    extra = page.replace("| `model_dir()` |", "| `model_dir()`, `draw()` |", 1)
    assert table_mismatch(extra) == (set(), {"draw"})


def test_the_generator_methods_it_names_exist() -> None:
    named = generator_names(PAGE.read_text())
    assert {"start_server", "wait_ready", "stop", "spawn"} <= named
    gone = sorted(n for n in named if not callable(getattr(Generator, n, None)))
    assert not gone, f"{PAGE}: Generator has no {gone}"


def test_code_blocks_quote_the_code() -> None:
    page = PAGE.read_text()
    assert len(BLOCK.findall(page)) >= 3
    bad = unquoted_blocks(page)
    assert not bad, f"{PAGE}: " + "; ".join(bad)
    paraphrased = page.replace("sender, receiver = background_pair(", "sender, receiver = "
                               "pair_of(", 1)
    assert len(unquoted_blocks(paraphrased)) == 1
