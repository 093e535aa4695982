"""The IPv6 study beside its IPv4 control: one table and one CDF plot from two studies.

``experiments/ipv6.yaml`` and ``experiments/ipv6_ipv4_control.yaml`` differ in
the topology's ``network`` only (and their names). Run both (root, under the
CPU lock), then set their finished runs side by side::

    flock /tmp/swell-cpu.lock sh -c '
      swell run experiments/ipv6_ipv4_control.yaml -o out/ipv6-control/v4 --no-report
      swell run experiments/ipv6.yaml -o out/ipv6-control/v6 --no-report'
    python bench/ipv6_control.py out/ipv6-control/v4 out/ipv6-control/v6 \\
        --plot docs/ipv6/control-cdf.png

For every background (matched by label) and family it prints one markdown row:
the background's asked rate (down = server side to client side, the bottleneck's
reverse direction), what crossed the bottleneck per direction (background
packets only, IP bytes, in the measurement window: ``bottleneck.*.bg_mean_mbps``),
Swing's delivered and offered load in the window, the foreground's completed
1 MB downloads and their median and p90 response time (client capture: SYN to
the last payload byte). Nothing here runs traffic; it reads ``run.json`` files.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any


def runs(study: Path) -> list[dict[str, Any]]:
    """The finished runs of a study, in file order."""
    found = sorted(study.glob("runs/*/rep*/run.json"))
    if not found:
        sys.exit(f"{study}: no finished runs (runs/*/rep*/run.json)")
    return [json.loads(p.read_text()) for p in found]


def row(run: dict[str, Any], family: str) -> dict[str, Any]:
    bn = run.get("bottleneck") or {}
    load = run.get("load") or {}
    fg = run.get("foreground") or {}
    rts = fg.get("response_times_s") or (fg.get("metrics") or {}).get("response_times_s") or []
    rev = load.get("reverse") or {}
    q = statistics.quantiles(rts, n=10) if len(rts) >= 2 else [float("nan")] * 9
    return {
        "label": run["label"], "family": family, "engine": run.get("engine"),
        "asked_down": (run.get("asked_mbps") or {}).get("reverse"),
        "bn_down": bn.get("reverse", {}).get("bg_mean_mbps", 0.0),
        "bn_up": bn.get("forward", {}).get("bg_mean_mbps", 0.0),
        "delivered_down": rev.get("delivered_mbps"), "offered_down": rev.get("offered_mbps"),
        "downloads": len(rts),
        "median_s": statistics.median(rts) if rts else float("nan"), "p90_s": q[-1],
        "rts": rts, "problems": len(run.get("problems") or []),
    }


def fmt(v: float | None, f: str = "{:.2f}") -> str:
    return "-" if v is None else f.format(v)


def table(rows: list[dict[str, Any]]) -> str:
    out = ["| background | plan | asked down | bottleneck down / up | Swing delivered / "
           "offered (down) | 1 MB downloads | median response | p90 |",
           "|---|---|---:|---|---|---:|---:|---:|"]
    for r in rows:
        sw = (f"{fmt(r['delivered_down'])} / {fmt(r['offered_down'])} "
              f"({r['delivered_down'] / r['offered_down']:.0%})"
              if r["offered_down"] else "-")
        out.append(f"| {r['label']} | {r['family']} | {fmt(r['asked_down'])} | "
                   f"{r['bn_down']:.2f} / {r['bn_up']:.2f} | {sw} | {r['downloads']} | "
                   f"{r['median_s']:.3f} s | {r['p90_s']:.3f} s |")
    return "\n".join(out)


def plot(rows: list[dict[str, Any]], dest: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(dict.fromkeys(r["label"] for r in rows))
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for r in rows:
        xs = sorted(r["rts"])
        if not xs:
            continue
        ys = [(i + 1) / len(xs) for i in range(len(xs))]
        ax.step(xs, ys, where="post", color=colours[labels.index(r["label"]) % len(colours)],
                linestyle="-" if r["family"] == "IPv6" else "--",
                label=f"{r['label']} ({r['family']})")
    ax.set_xlabel("response time of a 1 MB download (s)")
    ax.set_ylabel("CDF")
    ax.set_title("IPv6 study (solid) and its IPv4 control (dashed)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    dest.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(dest, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("v4", type=Path, help="study directory of the IPv4 control")
    ap.add_argument("v6", type=Path, help="study directory of the IPv6 study")
    ap.add_argument("--plot", type=Path, help="write the response-time CDFs here (PNG)")
    args = ap.parse_args()
    v4 = {r["label"]: row(r, "IPv4") for r in runs(args.v4)}
    v6 = {r["label"]: row(r, "IPv6") for r in runs(args.v6)}
    rows = [r for label in dict.fromkeys([*v6, *v4]) for r in (v6.get(label), v4.get(label))
            if r is not None]
    print(table(rows))
    if args.plot:
        plot(rows, args.plot)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
