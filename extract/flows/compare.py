"""Decoder comparison on every shared exporter datagram (the table in ``docs/flows.md``).

``python -m swell.extract.flows.compare [--shared DIR] [--netflow-parser BIN]``

Datagram sets: ``netflow/logstash_codec_netflow_dat`` (one datagram per file,
grouped into exporters by :func:`~swell.extract.flows.sources.datagram_group`)
and ``netflow/akvorado_testdata`` (one pcap per datagram, grouped by the name
less ``-template``/``-data``). Each group is fed to a fresh decoder, template
files first, then options data, then the rest.

Decoders:

* ``swell``: :class:`~swell.extract.flows.decoder.ExportDecoder`.
* ``netflow`` (PyPI, if installed): ``netflow.parse_packet`` with one
  templates dict per group and a caller-side retry buffer for
  ``TemplateNotRecognized`` (what its documentation tells callers to do).
* ``netflow_parser`` (crates.io, if ``--netflow-parser BIN`` names the small
  harness shown in ``docs/flows.md``): ``NetflowParser`` with pending-flow
  caching on, one parser per group; JSON output walked for data records.
* ``nfdump``: the group's datagrams sent over loopback to a fresh ``nfcapd``,
  the file read back with ``nfdump``. nfcapd keeps no per-datagram outcome,
  so only the group's flow count is known; a group with fewer flows than
  swell decoded counts its datagrams as failed ("fewer flows").

Field values: swell's records and nfdump's are paired per group
(:func:`field_agreement`: same addresses, ports and protocol, then in start
order) and every field compared (start and end at nfdump's millisecond,
packets, bytes, TCP flags): the JSON's ``nfdump_fields`` per group says how many
records are identical and which fields differ where they are not.

A datagram "decodes" when the decoder reports no error for it and nothing of
it stays waiting for a template.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import socket
import subprocess
import tempfile
import time
from collections import Counter
from itertools import groupby
from pathlib import Path
from typing import Any

from swell.extract.flows.decoder import ExportDecoder
from swell.extract.flows.nfcapd import need, read_nfcapd
from swell.extract.flows.sources import datagram_files, datagram_group, udp_payloads
from swell.extract.flows.table import FlowTable

Group = tuple[str, str, list[tuple[str, bytes]]]  # (set, group, [(source, datagram)])
LOGSTASH, AKVORADO = "logstash_codec_netflow_dat", "akvorado_testdata"


def _akv_group(p: Path) -> str:
    return re.sub(r"^(.*?)-?(options-)?(data\+templates|data|templates?)$", r"\1", p.stem)


def datagram_sets(shared: Path) -> list[Group]:
    """Every shared exporter datagram, grouped by exporter, in feeding order."""
    out: list[Group] = []
    base = shared / "netflow"
    for g, files in groupby(datagram_files([base / LOGSTASH]), key=datagram_group):
        out.append((LOGSTASH, g, [(f.name, f.read_bytes()) for f in files]))

    def key(p: Path) -> tuple[str, int, str]:
        rank = 0 if "templ" in p.stem else 1 if "options" in p.stem else 2
        return _akv_group(p), rank, p.stem

    pcaps = sorted((base / AKVORADO).glob("*.pcap"), key=key)
    for g, files in groupby(pcaps, key=_akv_group):
        dgrams = []
        for f in files:
            for i, _src, _port, payload in udp_payloads(f, Counter()):
                dgrams.append((f"{f.name}#{i}", payload))
        out.append((AKVORADO, g or "(cisco base)", dgrams))
    return out


# Each runner returns, per group: ([(source, flows, reason or "")], group flow total).
Outcome = tuple[list[tuple[str, int, str]], int]


def run_swell(group: Group) -> Outcome:
    dec = ExportDecoder(strict=False)
    for src, data in group[2]:
        dec.feed(data, group[1], src)
    t = dec.finish()
    rows = [(d.source, d.flows, "; ".join(dict.fromkeys(d.reasons))) for d in t.datagrams]
    return rows, len(t)


def run_pypi_netflow(group: Group) -> Outcome:
    import netflow
    from netflow.ipfix import IPFIXTemplateNotRecognized
    from netflow.v9 import V9TemplateNotRecognized

    templates: dict[str, Any] = {"netflow": {}, "ipfix": {}}
    results: dict[str, tuple[int, str]] = {}
    waiting: list[tuple[str, bytes]] = []
    missing = (V9TemplateNotRecognized, IPFIXTemplateNotRecognized)

    def attempt(src: str, data: bytes) -> bool:
        try:
            p = netflow.parse_packet(data, templates)
        except missing:
            return False
        except Exception as exc:  # the library's own failure, recorded as its reason
            results[src] = (0, f"{type(exc).__name__}: {str(exc)[:70]}")
            return True
        results[src] = (len(getattr(p, "flows", [])), "")
        return True

    for src, data in group[2]:
        if not attempt(src, data):
            waiting.append((src, data))
        waiting = [(s, d) for s, d in waiting if not attempt(s, d)]
    for s, _ in waiting:
        results[s] = (0, "template not recognized (never arrived)")
    rows = [(s, *results[s]) for s, _ in group[2]]
    return rows, sum(r[1] for r in rows)


def _count_data(node: Any) -> tuple[int, bool]:
    """(data records, any NoTemplate left) in netflow_parser's JSON."""
    if isinstance(node, dict):
        n, nt = 0, False
        for k, v in node.items():
            if k == "NoTemplate":
                nt = True
            elif k == "Data" and isinstance(v, dict) and isinstance(v.get("fields"), list):
                n += len(v["fields"])
            else:
                a, b = _count_data(v)
                n, nt = n + a, nt or b
        return n, nt
    if isinstance(node, list):
        res = [_count_data(x) for x in node]
        return sum(a for a, _ in res), any(b for _, b in res)
    return 0, False


def run_netflow_parser(groups: list[Group], binary: Path) -> list[Outcome]:
    lines = []
    for g in groups:
        lines.append(f"G {g[1]}")
        lines += [f"D {d.hex()}" for _, d in g[2]]
    res = subprocess.run(
        [str(binary)], input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=600
    )
    outs = iter(res.stdout.splitlines())
    result = []
    for g in groups:
        rows = []
        for src, _ in g[2]:
            j = json.loads(next(outs))
            n = 0
            for pkt in j["packets"]:
                if "V5" in pkt:
                    n += len(pkt["V5"].get("flowsets", []))
                else:
                    n += _count_data(pkt)[0]
            nt = _count_data(j["packets"])[1]
            why = j["error"] or ("data set without template" if nt else "")
            rows.append((src, n, (why or "")[:90]))
        result.append((rows, sum(r[1] for r in rows)))
    return result


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rx_queue(port: int) -> int:
    """Bytes waiting in the receive queue of the UDP socket bound to 127.0.0.1:port."""
    want = f"0100007F:{port:04X}"
    try:
        lines = Path("/proc/net/udp").read_text().splitlines()[1:]
    except OSError:
        return 0
    for ln in lines:
        f = ln.split()
        if len(f) > 4 and f[1] == want:
            return int(f[4].split(":")[1], 16)
    return 0


def _port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


FIELDS = ("start_ms", "end_ms", "packets", "bytes", "tcp_flags")


def field_agreement(a: FlowTable, b: FlowTable) -> dict[str, Any]:
    """Records of ``a`` and ``b`` paired by (addresses, ports, protocol) in start order,
    their fields compared: {"a", "b", "paired", "identical", "differ": {field: n}}."""

    def rows(t: FlowTable) -> dict[tuple[int, ...], list[tuple[int, ...]]]:
        c = t.cols
        out: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
        for i in range(len(t)):
            key = tuple(int(c[k][i]) for k in ("src_hi", "src_lo", "dst_hi", "dst_lo",
                                               "sport", "dport", "proto"))
            out.setdefault(key, []).append((
                int(c["start_ns"][i]) // 10**6, int(c["end_ns"][i]) // 10**6,
                int(c["packets"][i]), int(c["bytes"][i]), int(c["tcp_flags"][i])))
        return out

    ra, rb = rows(a), rows(b)
    differ: Counter[str] = Counter()
    paired = identical = 0
    for key, xs in ra.items():
        for x, y in zip(sorted(xs), sorted(rb.get(key, [])), strict=False):
            paired += 1
            bad = [f for f, u, v in zip(FIELDS, x, y, strict=True) if u != v]
            differ.update(bad)
            identical += not bad
    return {"a": len(a), "b": len(b), "paired": paired, "identical": identical,
            "differ": dict(differ)}


def nfcapd_table(datagrams: list[bytes]) -> FlowTable | None:
    """What nfcapd stored for ``datagrams`` sent to it over loopback (None: nothing)."""
    nfcapd = need("nfcapd")
    with tempfile.TemporaryDirectory(prefix="swell-nfcapd-") as tmp:
        port = _free_port()
        proc = subprocess.Popen(
            [nfcapd, "-b", "127.0.0.1", "-p", str(port), "-w", tmp, "-t", "3600"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 10
            while not _port_taken(port):  # ready when its socket is bound
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("nfcapd did not start")
                time.sleep(0.01)
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                for data in datagrams:
                    s.sendto(data, ("127.0.0.1", port))
                    time.sleep(0.002)  # keep datagram order through the collector
            deadline = time.monotonic() + 10
            while _rx_queue(port) and time.monotonic() < deadline:  # nfcapd read them all
                time.sleep(0.01)
            time.sleep(0.2)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
        files = [p for p in Path(tmp).rglob("nfcapd.*") if p.is_file()]
        return read_nfcapd(files) if files else None


def run_nfdump(group: Group) -> FlowTable | None:
    """Flows nfcapd stored for the group's datagrams (sent over loopback)."""
    return nfcapd_table([d for _, d in group[2]])


def _swell_table(group: Group) -> FlowTable:
    dec = ExportDecoder(strict=False)
    for src, data in group[2]:
        dec.feed(data, group[1], src)
    return dec.finish()


def compare(shared: Path, parser_bin: Path | None = None) -> dict[str, Any]:
    groups = datagram_sets(shared)
    table: dict[str, Any] = {"groups": [], "totals": {}}
    decoders: dict[str, list[Outcome]] = {"swell": [run_swell(g) for g in groups]}
    try:
        decoders["netflow (PyPI)"] = [run_pypi_netflow(g) for g in groups]
    except ImportError:
        pass
    if parser_bin is not None:
        decoders["netflow_parser (crates.io)"] = run_netflow_parser(groups, parser_bin)
    nf_tables = [run_nfdump(g) for g in groups]
    nf_flows = [len(t) if t is not None else 0 for t in nf_tables]
    swell_flows = [o[1] for o in decoders["swell"]]
    decoders["nfdump (nfcapd)"] = [
        ([(s, 0, "" if nf >= sw else f"fewer flows ({nf} vs {sw})") for s, _ in g[2]], nf)
        for g, nf, sw in zip(groups, nf_flows, swell_flows, strict=True)
    ]
    for name, outs in decoders.items():
        for dset in (LOGSTASH, AKVORADO):
            rows = [r for g, o in zip(groups, outs, strict=True) if g[0] == dset for r in o[0]]
            reasons = Counter(_reason_class(r[2]) for r in rows if r[2])
            table["totals"][f"{name} | {dset}"] = {
                "datagrams": len(rows),
                "decoded": sum(1 for r in rows if not r[2]),
                "failed": sum(1 for r in rows if r[2]),
                "flows": sum(o[1] for g, o in zip(groups, outs, strict=True) if g[0] == dset),
                "reasons": dict(reasons.most_common()),
            }
    identical = Counter()
    for i, g in enumerate(groups):
        versions = sorted({int.from_bytes(d[:2], "big") for _, d in g[2] if len(d) >= 2})
        nf = nf_tables[i]
        fields = field_agreement(_swell_table(g), nf) if nf is not None else None
        if fields:
            fields = {"swell": fields.pop("a"), "nfdump": fields.pop("b"), **fields}
            identical["records"] += fields["identical"]
            identical["paired"] += fields["paired"]
        table["groups"].append(
            {"set": g[0], "group": g[1], "datagrams": len(g[2]), "versions": versions}
            | {
                name: {"flows": outs[i][1], "failed": [r for r in outs[i][0] if r[2]]}
                for name, outs in decoders.items()
            }
            | {"nfdump_fields": fields}
        )
    table["totals"]["nfdump field agreement"] = dict(identical)
    return table


def _reason_class(why: str) -> str:
    why = re.sub(r"\d+", "N", why)
    return re.sub(r"\(exporter .*?\)", "", why).strip()[:80]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--shared", type=Path, default=Path(__file__).resolve().parents[3] / "shared" / "data"
    )
    ap.add_argument("--netflow-parser", type=Path, help="netflow_parser harness binary")
    ap.add_argument("--json", type=Path, help="also write the full comparison here")
    args = ap.parse_args(argv)
    res = compare(args.shared, args.netflow_parser)
    print("| decoder | datagram set | datagrams | decoded | failed | flows | reasons |")
    print("|---|---|---|---|---|---|---|")
    for k, v in res["totals"].items():
        if " | " not in k:
            continue
        name, dset = k.split(" | ")
        why = "; ".join(f"{n}x {r}" for r, n in v["reasons"].items()) or "-"
        print(
            f"| {name} | {dset} | {v['datagrams']} | {v['decoded']} | {v['failed']} | "
            f"{v['flows']} | {why} |"
        )
    agree = res["totals"]["nfdump field agreement"]
    print(f"\nfield values against nfdump: {agree.get('records', 0)} of {agree.get('paired', 0)}"
          " paired records identical (start, end, packets, bytes, flags)")
    if args.json:
        from swell.fsutil import write_json

        write_json(args.json, res)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
