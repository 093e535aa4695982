"""The report's bandwidth-estimation figures, drawn from a stored results file.

``tests/data/bwest_tools/results.json`` is the results file of one real study
(``capture.yaml`` there: slops, chirp, pathload twice, pathChirp on an idle
20 Mbit/s link). ``swell report`` draws from it, per estimator kind, the
estimates against the truth (``KIND-estimates.png``) and the Fig. 12-style error
chart (``KIND-error.png``). A figure is judged non-trivial against a baseline
drawn in the same test: the same file with every estimate taken out. What the
estimates add is blue (C0: ranges, values, the low-error bars); axes, the truth
and single chirps are black and grey.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import numpy as np

from swell.experiments.report import make_report

DATA = Path(__file__).resolve().parents[1] / "data" / "bwest_tools"
KINDS = ("slops", "chirp", "pathload", "pathchirp")


def _report(tmp: Path, data: dict) -> Path:
    study = tmp / "study"
    study.mkdir(parents=True)
    (study / "results.json").write_text(json.dumps(data))
    return make_report(study).parent


def _blue(png: Path) -> int:
    """Pixels where blue leads (C0 #1f77b4 and its 35% fill over white)."""
    import matplotlib.image

    img = matplotlib.image.imread(png)[..., :3]
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    return int(np.sum((b - r > 0.1) & (b >= g)))


def _without_estimates(data: dict) -> dict:
    out = copy.deepcopy(data)
    for run in out["runs"]:
        fg = run["foreground"]
        fg["estimates"], fg["summary"] = [], {}
    return out


def test_bwest_figures_from_a_stored_results_file(tmp_path: Path) -> None:
    data = json.loads((DATA / "results.json").read_text())
    assert {r["spec"]["foreground"]["kind"] for r in data["runs"]} == set(KINDS)
    full = _report(tmp_path / "full", data)
    empty = _report(tmp_path / "empty", _without_estimates(data))
    for kind in KINDS:
        for fig in ("estimates", "error"):
            png = full / f"{kind}-{fig}.png"
            assert png.is_file() and (full / f"{kind}-{fig}.svg").is_file(), png
            import matplotlib.image

            h, w = matplotlib.image.imread(png).shape[:2]
            assert h >= 200 and w >= 400, (png, h, w)
            drawn, base = _blue(png), _blue(empty / png.name)
            print(f"{png.name}: {drawn} blue pixels, {base} without the estimates")
            assert drawn >= base + 300, (png.name, drawn, base)
    page = (full / "index.html").read_text()
    for kind in KINDS:
        assert f"{kind}: available-bandwidth estimates" in page
        assert f'alt="{kind}: error per configuration (Fig. 12 style)"' in page
    # the table: pathload's range (19.83-20.04 against a truth of 20) and the two
    # timeouts of the run limited to 2 s, which has no estimate
    table = re.search(r"<h3>pathload: available-bandwidth estimates</h3>(.*?)</table>",
                      page).group(1)
    row = re.search(r"<tr><td>pathload</td>(.*?)</tr>", table).group(1)
    assert "<td>19.8 ± 0.0</td><td>20.0 ± 0.0</td><td>20.0 ± 0.0</td>" in row, row
    row = re.search(r"<tr><td>pathload-2s</td>(.*?)</tr>", table).group(1)
    assert row.startswith("<td>1</td><td>-</td><td>-</td>") and row.endswith("<td>2</td>"), row
