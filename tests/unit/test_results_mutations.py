"""A real results.json with single fields changed: ``swell report`` refuses in one line or
draws the report, never a traceback (issue 18).

The file is the Figure 5 study's (``docs/paper/fig05_fixed_loss/results.json``). Every
field of the file (its top level, ``experiment``, ``host`` and ``runs[0]``, recursively;
a list's first item) is changed to each other JSON type, or deleted: 2,144 files. Each
goes through :func:`~swell.experiments.results.load_results`, which either refuses it
with one line naming the file and the field (``damaged results file: runs[0].captures:
not a list (a str)``) or accepts it. The accepted changes are then drawn: those of
``runs[0]`` all of them, each on its own copy of the run (a copy holds one change per
field), those of the other fields one seeded choice of type per field, in one report
through the ``swell`` entry point. ``SWELL_FUZZ_SCALE=N`` draws N such reports (other
seeds).
"""

from __future__ import annotations

import copy
import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from swell.cli import main
from swell.errors import SwellError
from swell.experiments.results import check_results

REAL = Path(__file__).resolve().parents[2] / "docs" / "paper" / "fig05_fixed_loss" / "results.json"
TYPES: dict[str, Any] = {"null": None, "string": "x", "number": 1.5, "list": [], "mapping": {},
                         "bool": True}
DELETE = "delete"
Path_ = tuple[str | int, ...]


def _fields(obj: Any, at: Path_ = ()) -> list[Path_]:
    """Every field under ``obj`` (a list: its first item), parents before children."""
    out: list[Path_] = []
    items = obj.items() if isinstance(obj, dict) else \
        [(0, obj[0])] if isinstance(obj, list) and obj else []
    for k, v in items:
        out.append((*at, k))
        out += _fields(v, (*at, k))
    return out


def _changes(data: dict[str, Any]) -> list[tuple[Path_, str]]:
    """(field, change) for every field of the top level, experiment, host and runs[0]."""
    fields = [f for f in _fields(data) if f[0] != "runs" or (len(f) > 1 and f[1] == 0)]
    out = []
    for f in fields:
        old = _get(data, f)
        out += [(f, t) for t, v in TYPES.items() if type(v) is not type(old)]
        if isinstance(f[-1], str):
            out.append((f, DELETE))
    return out


def _get(data: Any, f: Path_) -> Any:
    for k in f:
        data = data[k]
    return data


def _apply(data: Any, f: Path_, change: str) -> bool:
    """Make one change in place; False when the field is not there (a changed parent)."""
    try:
        parent = _get(data, f[:-1])
        if change == DELETE:
            del parent[f[-1]]
        else:
            parent[f[-1]] = copy.deepcopy(TYPES[change])
    except (KeyError, IndexError, TypeError):
        return False
    return True


@pytest.fixture(scope="module")
def verdicts() -> dict[tuple[Path_, str], str | None]:
    """Per change: None when the results check accepts it, else its one-line refusal
    (:func:`check_results` is what :func:`load_results` runs on the file's JSON; the
    change is made in place and undone)."""
    data = json.loads(REAL.read_text())
    out: dict[tuple[Path_, str], str | None] = {}
    for f, change in _changes(data):
        parent = _get(data, f[:-1])
        old = parent[f[-1]]
        assert _apply(data, f, change)
        try:
            check_results(data, "results.json")
            out[(f, change)] = None
        except SwellError as exc:
            out[(f, change)] = exc.one_line()
        parent[f[-1]] = old  # undone (a deleted key comes back last: order is not read)
    assert data == json.loads(REAL.read_text())
    return out


def test_every_change_is_refused_in_one_line_or_accepted(verdicts) -> None:
    assert len(verdicts) > 2000
    refused = {k: v for k, v in verdicts.items() if v is not None}
    for line in refused.values():
        assert "\n" not in line and "results.json" in line, line
    # the audit's tracebacks (report.py lines 139, 189, 278) are refusals naming the field
    for f, change, says in ((("runs", 0, "captures"), "string", "runs[0].captures: not a "
                             "list (a str)"),
                            (("runs", 0, "spec", "background"), "string", "runs[0].spec."
                             "background: not a mapping (a str)"),
                            (("runs", 0, "foreground", "response_times_s"), "null",
                             "runs[0].foreground.response_times_s: not a list (null)"),
                            (("runs", 0, "foreground", "response_times_s"), "string",
                             "runs[0].foreground.response_times_s: not a list (a str)")):
        assert says in (refused.get((f, change)) or ""), (f, change)
    assert 100 < len(refused) < len(verdicts)


def test_accepted_changes_draw_a_report(capsys, verdicts, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWELL_QUIET", "1")
    accepted = [k for k, v in verdicts.items() if v is None]
    for seed in range(int(os.environ.get("SWELL_FUZZ_SCALE", "1"))):
        data = _combined(json.loads(REAL.read_text()), accepted, random.Random(18 + seed))
        path = tmp_path / f"seed{seed}" / "results.json"
        path.parent.mkdir()
        path.write_text(json.dumps(data))
        code = main(["report", str(path), "-o", str(tmp_path / f"seed{seed}" / "report")])
        err = capsys.readouterr().err
        assert code == 0 and "Traceback" not in err, err
        assert (tmp_path / f"seed{seed}" / "report" / "index.html").is_file()


def _combined(data: dict[str, Any], accepted: list[tuple[Path_, str]],
              rng: random.Random) -> dict[str, Any]:
    """One file holding the accepted changes: those of runs[0] on copies of it (each
    copy one change per field, its own label), one seeded type per other field (a field
    whose parent or child is changed already is left as it is)."""
    run_changes: dict[Path_, list[str]] = {}
    other: dict[Path_, list[str]] = {}
    for f, change in accepted:
        if f[0] == "runs":
            assert len(f) > 2, f  # a whole run changed is never accepted
        (run_changes if f[0] == "runs" else other).setdefault(f, []).append(change)
    copies: list[dict[str, Any]] = []
    for f, changes in run_changes.items():
        rng.shuffle(changes)
        for i, change in enumerate(changes):
            while len(copies) <= i:
                run = copy.deepcopy(data["runs"][0])
                run["label"] = f"{run['label']} copy {len(copies)}"
                copies.append(run)
            _apply(copies[i], f[2:], change)
    done: list[Path_] = []
    for f in sorted(other, key=len, reverse=True):  # leaves first
        if any(d[:len(f)] == f or f[:len(d)] == d for d in done):
            continue
        if _apply(data, f, rng.choice(other[f])):
            done.append(f)
    data["runs"] = list(data["runs"]) + copies
    return data


@pytest.mark.parametrize("field,change", [(("runs", 0, "captures"), "string"),
                                          (("runs", 0, "spec", "background"), "string"),
                                          (("runs", 0, "foreground", "response_times_s"),
                                           "null")])
def test_report_refuses_in_one_line(capsys, tmp_path: Path, field: Path_, change: str) -> None:
    """Through the entry point: exit 2, one line naming the file and the field, nothing
    written (these gave tracebacks at report.py lines 139, 189 and 278)."""
    data = json.loads(REAL.read_text())
    _apply(data, field, change)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    assert main(["report", str(path), "-o", str(tmp_path / "report")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0], lines
    assert "damaged results file: runs[0]." in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]
