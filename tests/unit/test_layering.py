"""The layering contract (``swell.layering``): the real tree keeps it, and a tree that
breaks it is caught, rule by rule."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from swell.layering import find_modules, imports_of, package_dirs, violations

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = """\
[tool.setuptools]
package-dir = { "swell" = "swell", "swell.extract" = "extract", \
"swell.topologies" = "topologies", "swell.generators" = "generators", \
"swell.analysis" = "analysis", "swell.experiments" = "experiments" }
"""


def make_tree(root: Path, files: dict[str, str]) -> Path:
    """A fake checkout: pyproject.toml, an empty ``__init__.py`` per package folder,
    and ``files`` (path -> source)."""
    (root / "pyproject.toml").write_text(PYPROJECT)
    for folder in ("swell", "extract", "topologies", "generators", "analysis", "experiments"):
        (root / folder).mkdir()
        (root / folder / "__init__.py").write_text('"""package"""\n')
    for rel, text in files.items():
        (root / rel).write_text(textwrap.dedent(text))
    return root


def test_the_real_tree_keeps_the_contract() -> None:
    found = violations(REPO)
    assert not found, "layering violations:\n" + "\n".join(found)


def test_the_real_tree_is_what_is_checked() -> None:
    dirs = package_dirs(REPO)
    assert dirs["swell.extract"] == "extract" and dirs["swell"] == "swell"
    known = find_modules(REPO, dirs)
    for name in ("swell.cli", "swell.layering", "swell.extract.pipeline", "swell.topologies.probe"):
        assert name in known
    assert not any(m.startswith(("tests", "bench")) for m in known)


def test_a_clean_tree_has_no_violations(tmp_path: Path) -> None:
    root = make_tree(tmp_path, {
        "topologies/layout.py": "from swell.errors import E\nfrom swell.extract import model\n",
        "extract/model.py": "import numpy\nfrom . import reader\n",
        "extract/reader.py": "from swell.errors import E\n",
        "swell/errors.py": "E = 1\n",
        "experiments/runner.py": "from swell.topologies.layout import x\nimport swell.generators\n",
        "swell/cli.py": "import swell.experiments.runner\n",
    })  # fmt: skip
    assert violations(root) == []


def test_stage_rules_catch_every_kind_of_import(tmp_path: Path) -> None:
    root = make_tree(tmp_path, {
        "topologies/layout.py": '"""layout"""\n',
        "generators/base.py": """\
            def place():
                from swell.topologies.layout import in_ns
                return in_ns
            """,
        "generators/rel.py": "from ..topologies import layout\n",
        "analysis/plots.py": """\
            from typing import TYPE_CHECKING

            if TYPE_CHECKING:
                from swell.generators.base import place
            """,
        "extract/dyn.py": 'import importlib\nimportlib.import_module("swell.experiments")\n',
        "topologies/uses_gen.py": "import swell.generators.base as b\n",
    })  # fmt: skip
    found = violations(root)
    text = "\n".join(found)
    assert len(found) == 5, text
    assert (
        "generators/base.py:2: swell.generators.base imports swell.topologies.layout "
        "(function level): swell.generators must not import swell.topologies"
    ) in found
    assert "generators/rel.py:1: swell.generators.rel imports swell.topologies.layout" in text
    assert (
        "swell.analysis.plots imports swell.generators.base (TYPE_CHECKING): "
        "swell.analysis must not import swell.generators"
    ) in text
    assert "extract/dyn.py:2: swell.extract.dyn imports swell.experiments " in text
    assert "only swell.cli and swell.experiments itself import swell.experiments" in text
    assert "swell.topologies must not import swell.generators" in text


def test_core_and_cli_rules(tmp_path: Path) -> None:
    root = make_tree(tmp_path, {
        "swell/progress.py": "def bar():\n    from swell.analysis import plots\n",
        "swell/__main__.py": "from swell.cli import main\n",
        "swell/cli.py": "from swell.extract.cli import register\n",
        "extract/cli.py": "from swell.extract.model import fit\n",
        "extract/model.py": "fit = 1\n",
        "analysis/plots.py": "from swell.extract.cli import register\n",
        "experiments/x.py": "from swell.extract import trace_cli\n",
        "extract/trace_cli.py": '"""trace"""\n',
    })  # fmt: skip
    found = violations(root)
    assert found == [
        "analysis/plots.py:1: swell.analysis.plots imports swell.extract.cli (module level): "
        "CLI modules are imported only by CLI modules",
        "experiments/x.py:1: swell.experiments.x imports swell.extract.trace_cli (module level): "
        "CLI modules are imported only by CLI modules",
        "swell/progress.py:2: swell.progress imports swell.analysis.plots (function level): "
        "core modules import no stage package (swell.analysis)",
    ]


def test_cycles_are_reported_by_name(tmp_path: Path) -> None:
    root = make_tree(tmp_path, {
        "extract/a.py": "from swell.extract import b\n",
        "extract/b.py": "import swell.extract.a\n",
        "extract/c.py": "from swell.extract.d import x\n",  # c -> d -> e -> c, e's lazily
        "extract/d.py": "from swell.extract.e import y\nx = 1\n",
        "extract/e.py": "def f():\n    from swell.extract.c import z\ny = 1\n",
        "extract/f.py": "from swell.extract.g import G\n",  # typing only: no cycle
        "extract/g.py": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from swell.extract.f import F\nG = 1\n"
        ),
    })  # fmt: skip
    found = violations(root)
    assert found == [
        "import cycle: swell.extract.a -> swell.extract.b -> swell.extract.a",
        "import cycle: swell.extract.c -> swell.extract.d -> swell.extract.e -> swell.extract.c; "
        "closed by function-level imports at extract/e.py:2",
    ]


def test_imports_resolve_to_modules(tmp_path: Path) -> None:
    root = make_tree(tmp_path, {
        "extract/model.py": """\
            from swell import errors, __version__
            from swell.extract import reader as r
            from . import reader
            from .reader import open_trace
            from .. import errors as e2
            """,
        "extract/reader.py": "open_trace = 1\n",
        "swell/errors.py": "E = 1\n",
    })  # fmt: skip
    known = find_modules(root, package_dirs(root))
    got = [
        (i.target, i.line)
        for i in imports_of("swell.extract.model", root / "extract" / "model.py", known, root)
    ]
    assert got == [
        ("swell.errors", 1), ("swell", 1), ("swell.extract.reader", 2),
        ("swell.extract.reader", 3), ("swell.extract.reader", 4), ("swell.errors", 5),
    ]  # fmt: skip


def test_a_tree_without_package_dirs_is_refused(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    with pytest.raises(ValueError, match="package-dir"):
        violations(tmp_path)
