"""One strict base model: only ``swell/typed.py`` says ``extra="forbid"``.

Every typed input model derives from :class:`swell.typed.StrictModel`; a module
that writes its own ``ConfigDict(extra="forbid", ...)`` (or a ``Config`` class,
a class keyword or a config dict saying the same) grows a second base that can
drift from the first (frozen or not, other options). Found by reading the
source with :mod:`ast`, so comments and strings do not count, and every way of
spelling it is shown to be caught.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

from swell.layering import find_modules, package_dirs

REPO = Path(__file__).resolve().parents[2]
ALLOWED = {Path("swell/typed.py")}
OTHER_DIRS = ("bench", "scripts", "tests")  # not packages, but code that could define models


def _is_forbid(node: ast.AST | None) -> bool:
    """``"forbid"`` or ``Extra.forbid``."""
    return ((isinstance(node, ast.Constant) and node.value == "forbid")
            or (isinstance(node, ast.Attribute) and node.attr == "forbid"))


def strict_configs(source: str) -> list[int]:
    """Lines that set a pydantic model's ``extra`` to forbid, in any spelling:
    ``ConfigDict(extra="forbid")`` / ``dict(extra=...)`` / ``class M(BaseModel,
    extra="forbid")`` (a keyword), ``{"extra": "forbid"}`` (a config dict),
    ``class Config: extra = "forbid"`` (an assignment)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.keyword) and node.arg == "extra" and _is_forbid(node.value):
            lines.append(node.value.lineno)
        elif isinstance(node, ast.Dict):
            lines += [v.lineno for k, v in zip(node.keys, node.values, strict=True)
                      if isinstance(k, ast.Constant) and k.value == "extra" and _is_forbid(v)]
        elif isinstance(node, ast.Assign | ast.AnnAssign) and _is_forbid(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "extra" for t in targets):
                lines.append(node.lineno)
    return sorted(lines)


def source_files(root: Path) -> list[Path]:
    """Every module of the swell packages, and the Python files of bench, scripts, tests."""
    files = set(find_modules(root, package_dirs(root)).values())
    for folder in OTHER_DIRS:
        files |= set((root / folder).rglob("*.py"))
    return sorted(files)


def second_bases(root: Path) -> list[str]:
    """``path:line`` of every strict config outside the allowed module."""
    found = []
    for path in source_files(root):
        rel = path.relative_to(root)
        if rel not in ALLOWED:
            found += [f"{rel}:{line}" for line in strict_configs(path.read_text())]
    return found


def test_only_swell_typed_defines_a_strict_config() -> None:
    found = second_bases(REPO)
    assert not found, ("a second strict base (derive from swell.typed.StrictModel "
                       "instead): " + ", ".join(found))


def test_the_real_base_is_seen() -> None:
    files = source_files(REPO)
    assert REPO / "swell/typed.py" in files and REPO / "bench/fidelity.py" in files
    assert REPO / "topologies/spec.py" in files and REPO / "experiments/schema.py" in files
    assert strict_configs((REPO / "swell/typed.py").read_text()) != []


def test_every_spelling_is_caught() -> None:
    src = textwrap.dedent('''\
        from pydantic import BaseModel, ConfigDict, Extra


        class A(BaseModel):
            model_config = ConfigDict(frozen=True, extra="forbid")


        class B(BaseModel, extra="forbid"):
            x: int


        class C(BaseModel):
            model_config = {"frozen": True, "extra": "forbid"}


        class D(BaseModel):
            class Config:
                extra = Extra.forbid


        class E(BaseModel):
            model_config = dict(extra="forbid")
        ''')
    assert strict_configs(src) == [5, 8, 13, 18, 22]


def test_what_is_not_a_strict_config() -> None:
    src = textwrap.dedent('''\
        """Models with extra="forbid" reject unknown keys."""  # a docstring
        from pydantic import BaseModel, ConfigDict

        from swell.typed import StrictModel


        class A(StrictModel):  # extra="forbid", inherited
            x: int


        class B(BaseModel):
            model_config = ConfigDict(extra="ignore")


        def f(err: dict) -> bool:
            return err["type"] == "extra_forbidden"
        ''')
    assert strict_configs(src) == []


def test_a_tree_with_a_second_base_fails(tmp_path: Path) -> None:
    """The duplicate ``topologies/testbed.py`` once had, in a tree of its own."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.setuptools]\npackage-dir = { "swell" = "swell", '
        '"swell.topologies" = "topologies" }\n')
    for folder in ("swell", "topologies"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text('"""package"""\n')
    (tmp_path / "swell/typed.py").write_text(
        "from pydantic import BaseModel, ConfigDict\n\n\nclass StrictModel(BaseModel):\n"
        '    model_config = ConfigDict(extra="forbid", frozen=True)\n')
    (tmp_path / "topologies/testbed.py").write_text(
        "from pydantic import BaseModel, ConfigDict\n\n\nclass _Strict(BaseModel):\n"
        '    model_config = ConfigDict(extra="forbid", frozen=True)\n')
    assert second_bases(tmp_path) == ["topologies/testbed.py:5"]
    (tmp_path / "topologies/testbed.py").write_text(
        "from swell.typed import StrictModel\n\n\nclass Ssh(StrictModel):\n    user: str\n")
    assert second_bases(tmp_path) == []
