"""swell's layering as a contract the tests check (``tests/unit/test_layering.py``).

The pipeline's stages are packages (``swell.extract``, ``swell.topologies``, ...,
mapped from top-level folders by ``pyproject.toml``); which may import which is
written down here, as data, and :func:`violations` checks a source tree against it
without importing anything: it parses every ``.py`` file of the packages with
:mod:`ast` and looks at every import of ``swell`` wherever it stands (module level,
inside functions, under ``if TYPE_CHECKING:``), including relative imports and
``importlib.import_module("swell...")`` / ``__import__`` calls with a literal name.

The rules (a stage "imports" another when any of its modules imports any module of
the other):

1. ``swell.extract`` and ``swell.analysis`` import none of ``swell.topologies``,
   ``swell.generators``; ``swell.generators`` does not import ``swell.topologies``
   and ``swell.topologies`` does not import ``swell.generators``
   (:data:`FORBIDDEN`). Traces and models, and their analysis, know nothing of
   how traffic is emulated or generated; topologies and generators are siblings
   that only ``swell.experiments`` puts together.
2. Only ``swell.cli`` and ``swell.experiments`` itself import ``swell.experiments``:
   it is the top of the pipeline (:data:`EXPERIMENTS_IMPORTERS`).
3. The core modules (``swell/*.py``: errors, file writing, progress, native
   artefacts, ...) import no stage package (:data:`CORE_MAY_IMPORT` is empty: none
   needs one today). ``swell.cli`` and ``swell.__main__`` are exempt: the CLI is the
   top (it loads the stages' CLI modules by name from ``COMMAND_MODULES``).
4. CLI modules (``swell.cli``, ``swell.<stage>.cli``, ``*_cli``) are imported only
   by CLI modules and ``swell.__main__``: library code calls library functions
   (e.g. ``swell.extract.pipeline.extract_model``), never a command's module.
5. No import cycles among modules. A cycle of module-level imports breaks
   imports outright (a partly initialised module); one closed by a function-level
   import is the same knot, only deferred (the usual way to "fix" a cycle), so it
   is reported too, naming the function-level imports that close it. Imports under
   ``if TYPE_CHECKING:`` never run and form no cycle (a module may name, for type
   checking, a class of a module that imports it).

``bench/`` and ``tests/`` are outside the contract. An import is an edge to the
module it names (``from swell.extract import variants`` to
``swell.extract.variants``, ``from swell import __version__`` to ``swell``), not to
the parent packages it also initialises (their ``__init__`` files import nothing).
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT_PACKAGE = "swell"
# importer's stage -> stages it must not import (rule 1; swell.experiments: rule 2)
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "swell.extract": ("swell.topologies", "swell.generators"),
    "swell.analysis": ("swell.topologies", "swell.generators"),
    "swell.generators": ("swell.topologies",),
    "swell.topologies": ("swell.generators",),
}
EXPERIMENTS = "swell.experiments"
EXPERIMENTS_IMPORTERS = ("swell.cli",)  # besides swell.experiments itself (rule 2)
CORE_EXEMPT = ("swell.cli", "swell.__main__")  # the top: may import anything (rule 3)
CORE_MAY_IMPORT: tuple[str, ...] = ()  # stage packages core modules may import (rule 3)
CLI_IMPORTERS_EXTRA = ("swell.__main__",)  # may import CLI modules besides CLIs (rule 4)

# where an import stands: run on import, run later (in a function), or typing only
MODULE, FUNCTION, TYPING = "module level", "function level", "TYPE_CHECKING"


@dataclass(frozen=True)
class Import:
    """One import of a swell module, resolved to the module it names."""

    importer: str
    target: str
    path: str  # the importer's file, relative to the root
    line: int
    where: str  # MODULE, FUNCTION or TYPING


def package_dirs(root: Path) -> dict[str, str]:
    """The ``[tool.setuptools] package-dir`` table of ``root/pyproject.toml``."""
    with open(root / "pyproject.toml", "rb") as f:
        data = tomllib.load(f)
    try:
        return dict(data["tool"]["setuptools"]["package-dir"])
    except KeyError as exc:
        raise ValueError(f"{root / 'pyproject.toml'}: no [tool.setuptools] package-dir") from exc


def find_modules(root: Path, dirs: Mapping[str, str]) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file under the package folders."""
    out: dict[str, Path] = {}
    for pkg, folder in dirs.items():
        base = root / folder
        for path in sorted(base.rglob("*.py")):
            rel = path.relative_to(base)
            if any(p == "__pycache__" or p.startswith(".") for p in rel.parts):
                continue
            parts = [*pkg.split("."), *rel.with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, where: str) -> Iterator[tuple[ast.AST, str]]:
    """Every node below ``node`` with where it stands (see MODULE, FUNCTION, TYPING)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            # the body runs when called; decorators, defaults, annotations where it stands
            inner = FUNCTION if where == MODULE else where
            body = child.body if isinstance(child.body, list) else [child.body]
            yield child, where
            for part in ast.iter_child_nodes(child):
                yield part, inner if part in body else where
                yield from _walk(part, inner if part in body else where)
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.body:
                yield stmt, TYPING
                yield from _walk(stmt, TYPING)
            for stmt in child.orelse:
                yield stmt, where
                yield from _walk(stmt, where)
        else:
            yield child, where
            yield from _walk(child, where)


def _dynamic_name(node: ast.Call) -> str | None:
    """The literal module name of ``importlib.import_module("x")`` or ``__import__("x")``."""
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    if name not in ("import_module", "__import__") or not node.args:
        return None
    arg = node.args[0]
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None


def _is_swell(name: str) -> bool:
    return name == ROOT_PACKAGE or name.startswith(ROOT_PACKAGE + ".")


def imports_of(module: str, path: Path, known: Mapping[str, Path], root: Path) -> list[Import]:
    """Every import of a swell module in ``path`` (the file of ``module``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_pkg = path.name == "__init__.py"
    package = module if is_pkg else module.rpartition(".")[0]
    rel = path.relative_to(root).as_posix()
    out: list[Import] = []

    def add(target: str, node: ast.AST, where: str) -> None:
        if _is_swell(target):
            out.append(Import(module, target, rel, getattr(node, "lineno", 0), where))

    for node, where in _walk(tree, MODULE):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node, where)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                up = package.split(".")
                base_parts = up[: len(up) - (node.level - 1)] if node.level > 1 else up
                base = ".".join([*base_parts, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                add(sub if sub in known else base, node, where)
        elif isinstance(node, ast.Call):
            name = _dynamic_name(node)
            if name is not None:
                add(name, node, where)
    return out


def _in(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _stage_of(name: str, stages: tuple[str, ...]) -> str | None:
    return next((s for s in stages if _in(name, s)), None)


def _is_cli(name: str) -> bool:
    last = name.rpartition(".")[2]
    return last == "cli" or last.endswith("_cli")


def rule_violations(imp: Import, stages: tuple[str, ...]) -> list[str]:
    """What is wrong with one import under rules 1-4 (see the module docstring)."""
    src, dst = _stage_of(imp.importer, stages), _stage_of(imp.target, stages)
    found = []
    for banned in FORBIDDEN.get(src or "", ()):
        if _in(imp.target, banned):
            found.append(f"{src} must not import {banned}")
    if dst == EXPERIMENTS and src != EXPERIMENTS and imp.importer not in EXPERIMENTS_IMPORTERS:
        found.append(f"only {' and '.join(EXPERIMENTS_IMPORTERS)} and {EXPERIMENTS} itself "
                     f"import {EXPERIMENTS}")  # fmt: skip
    if src is None and imp.importer not in CORE_EXEMPT and dst and dst not in CORE_MAY_IMPORT:
        found.append(f"core modules import no stage package ({dst})")
    if _is_cli(imp.target) and not (_is_cli(imp.importer) or imp.importer in CLI_IMPORTERS_EXTRA):
        found.append("CLI modules are imported only by CLI modules")
    return [f"{imp.path}:{imp.line}: {imp.importer} imports {imp.target} ({imp.where}): {why}"
            for why in found]  # fmt: skip


def _cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components that hold a cycle, each sorted (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def _shortest_cycle(start: str, graph: Mapping[str, set[str]], members: set[str]) -> list[str]:
    """A shortest path start -> ... -> start inside one component (breadth first)."""
    prev: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph.get(v, set()) & members):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return [*reversed(path), start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return [start, start]  # not reached for a component that holds a cycle


def cycle_violations(imports: list[Import], known: Mapping[str, Path]) -> list[str]:
    """Import cycles among the modules, over the imports that run (rule 5)."""
    graph: dict[str, set[str]] = {m: set() for m in known}
    first: dict[tuple[str, str], Import] = {}  # edge -> its import, module level first
    for imp in sorted(imports, key=lambda i: (i.where != MODULE, i.line)):
        if imp.where != TYPING and imp.target in known and imp.target != imp.importer:
            graph[imp.importer].add(imp.target)
            first.setdefault((imp.importer, imp.target), imp)
    out = []
    for comp in _cycles(graph):
        path = _shortest_cycle(comp[0], graph, set(comp))
        edges = [first[e] for e in zip(path, path[1:], strict=False)]
        late = [f"{i.path}:{i.line}" for i in edges if i.where != MODULE]
        text = f"import cycle: {' -> '.join(path)}"
        if len(comp) > len(path) - 1:
            text += f" (one of {len(comp)} modules in cycles: {', '.join(comp)})"
        if late:
            text += f"; closed by function-level imports at {', '.join(late)}"
        out.append(text)
    return out


def violations(root: str | Path, dirs: Mapping[str, str] | None = None) -> list[str]:
    """Every breach of the layering contract in the tree at ``root``, one line each.

    ``dirs`` maps package names to folders under ``root`` (default: the
    ``package-dir`` table of ``root/pyproject.toml``). An empty list: the tree keeps
    the contract."""
    root = Path(root)
    dirs = package_dirs(root) if dirs is None else dirs
    known = find_modules(root, dirs)
    stages = tuple(sorted((p for p in dirs if p != ROOT_PACKAGE), key=len, reverse=True))
    imports = [i for m, path in sorted(known.items()) for i in imports_of(m, path, known, root)]
    found = [v for imp in imports for v in rule_violations(imp, stages)]
    return found + cycle_violations(imports, known)
