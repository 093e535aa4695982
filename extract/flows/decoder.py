"""NetFlow v5, v9 and IPFIX export datagrams -> flow rows (swell's own decoder).

Why our own: ``docs/flows.md`` compares it with PyPI ``netflow``, crates.io
``netflow_parser`` and nfdump on every shared exporter datagram. In short, the
maintained decoders either key templates by template id alone, drop a whole
datagram for one unknown template, or do not apply options-template sampling;
this decoder (about 500 lines) does all of the following.

State (:class:`ExportDecoder`, fed one datagram at a time, any number of
exporters interleaved):

* A template cache keyed by ``(exporter, version, domain, template id)``:
  the domain is the v9 source id or the IPFIX observation domain, so two
  routers (or two line cards) reusing template 256 never collide. IPFIX
  template withdrawals (field count 0) drop the entry; a re-sent template
  replaces it.
* Data before its template: a data set whose template is unknown is kept
  (with its datagram's header context) in a per-template buffer and decoded as
  soon as the template arrives. At :meth:`ExportDecoder.finish`, sets still
  waiting become one-line reasons on their datagrams ("template 260 never
  arrived"). The buffer is bounded (:data:`MAX_PENDING` sets per domain).
* Options templates (v9 flowset 1, IPFIX set 3): their data records carry
  sampling (samplingInterval, samplerRandomInterval per samplerId,
  samplingPacketInterval/Space per selectorId, samplingSize/Population) and
  systemInitTimeMilliseconds. Flow records are rescaled by the rate stated in
  the record itself, else by their sampler's rate, else by the domain's
  default (or the v5 header's sampling interval); the rate applied is stored.
  A rate learnt after a flow was decoded does not change that flow.
* Field specifiers: enterprise elements (IPFIX E bit + PEN) and unknown
  elements are skipped by length; variable-length fields (length 0xFFFF, a
  1-byte length or 255 + 2-byte length) are walked; fields of any
  reduced-size encoding are read as big-endian integers; zero-length fields
  take no bytes.
* Padding: bytes after the last whole record of a set, and zero bytes after
  the last set of a datagram, are padding.
* Times: v5/v9 SysUptime-relative times (first/last switched) are turned into
  absolute ones against the header's export time (32-bit uptime wrap
  handled); IPFIX absolute times (seconds, milliseconds, NTP micro- and
  nanoseconds, delta microseconds before export) are read as they are;
  flowStart/EndSysUpTime in IPFIX are anchored at systemInitTimeMilliseconds
  (from the record or the domain's options data), or, lacking it, at the
  export time (noted). Durations fill in a missing end or start; a record with
  no time at all gets the export time (noted).

Malformed datagrams (a header or set length beyond the data, a template cut
short, a record running past its set) raise :class:`Malformed` internally;
with ``strict=True`` the decoder turns that into a one-line
:class:`~swell.errors.SwellError` naming the source, otherwise it becomes the
datagram's reason and the rest of the input goes on. A malformed v9/IPFIX
message is discarded whole (RFC 7011 section 9.1: "it MUST discard the IPFIX
Message"; v9 likewise): each message is read to its end before anything is
committed, so neither its templates nor its options (sampling rates) nor its
flows reach the decoder's state, even those of sets before the damage. A data
set that waited for its template was committed with its datagram; if it turns
out malformed when the template comes, it alone is dropped, with the reason
on its datagram. Messages concatenated in one v5/IPFIX file are committed one
by one.
"""

from __future__ import annotations

import struct
from collections import defaultdict
from dataclasses import dataclass, field

from swell.errors import SwellError
from swell.extract.flows import fields as F
from swell.extract.flows.frames import parse_frame
from swell.extract.flows.table import DatagramResult, FlowBuilder, FlowTable, addr_pair

MAX_PENDING = 4096  # buffered data sets per (exporter, version, domain)
V5_HEADER, V5_RECORD = 24, 48
V9_HEADER, IPFIX_HEADER = 20, 16
MS, US = 1_000_000, 1_000
ICMP = (1, 58)


Key = tuple[str, int, int, int]  # (exporter, version, domain, template id)


class Malformed(Exception):
    """A datagram whose lengths do not add up (internal; see the module docstring)."""


@dataclass
class Template:
    tid: int
    fields: tuple[tuple[int, int], ...]  # (element id or -1 when skipped, length)
    options: bool

    def __post_init__(self) -> None:
        self.fixed = all(ln != 0xFFFF for _, ln in self.fields)
        self.min_len = sum(1 if ln == 0xFFFF else ln for _, ln in self.fields)
        self.plan: list[tuple[int, int, int]] = []  # (offset, length, element) when fixed
        off = 0
        for fid, ln in self.fields:
            if fid in F.WANTED and ln != 0xFFFF:
                self.plan.append((off, ln, fid))
            off += 0 if ln == 0xFFFF else ln
        self.is_flow = not self.options and any(f in F.FLOW_MARKERS for f, _ in self.fields)


@dataclass
class Context:
    """A datagram's header, kept with a data set that waits for its template."""

    exporter: str
    exp_id: int
    version: int
    domain: int
    export_ns: int
    uptime_ms: int | None
    result: DatagramResult


@dataclass
class DomainState:
    default_rate: int = 0
    samplers: dict[int, int] = field(default_factory=dict)
    sys_init_ns: int | None = None
    pending: int = 0
    waiting: dict[int, list[tuple[int, int, int]]] = field(default_factory=dict)


class ExportDecoder:
    """Stateful decoder: :meth:`feed` each datagram, then :meth:`finish` for the table."""

    def __init__(self, strict: bool = False) -> None:
        self.strict = strict
        self.out = FlowBuilder()
        self.templates: dict[Key, Template] = {}
        self.seen_templates: set[Key] = set()
        self.pending: dict[Key, list[tuple[bytes, Context]]] = defaultdict(list)
        self.domains: dict[tuple[str, int, int], DomainState] = defaultdict(DomainState)
        self.results: list[DatagramResult] = []

    # -- datagrams ------------------------------------------------------------------------
    def feed(self, data: bytes, exporter: str, source: str) -> DatagramResult:
        """Decode one export datagram from ``exporter`` (an address or a name)."""
        res = DatagramResult(source=source, exporter=exporter)
        self.results.append(res)
        if len(data) < 2:
            return self._bad(res, "malformed", f"datagram of {len(data)} bytes")
        res.version = version = struct.unpack_from("!H", data)[0]
        try:
            if version == 5:
                used = self._v5(data, exporter, res)
            elif version in (9, 10):
                used = self._v9_ipfix(data, exporter, version, res)
            else:
                self.out.undecodable["not NetFlow v5/v9/IPFIX"] += 1
                res.reasons.append(f"not NetFlow v5/v9/IPFIX (version field {version})")
                return res
            # Files may hold several v5/IPFIX messages back to back (a v9 message has
            # no length: its sets run to the end of the datagram).
            while used < len(data) and version in (5, 10):
                rest = data[used:]
                if len(rest) < 4 or int.from_bytes(rest[:2], "big") != version:
                    if any(rest):
                        self.out.notes["bytes after the last message ignored"] += len(rest)
                    break
                self.out.notes["messages concatenated in one datagram"] += 1
                step = (
                    self._v5(rest, exporter, res)
                    if version == 5
                    else self._v9_ipfix(rest, exporter, version, res)
                )
                used += step
        except Malformed as exc:
            self._bad(res, "malformed", str(exc))
        return res

    def _bad(self, res: DatagramResult, kind: str, why: str) -> DatagramResult:
        if self.strict:
            raise SwellError(res.source, f"{kind} NetFlow datagram: {why}")
        self.out.undecodable[f"{kind} datagram"] += 1
        res.reasons.append(f"{kind}: {why}")
        return res

    def _v5(self, data: bytes, exporter: str, res: DatagramResult) -> int:
        if len(data) < V5_HEADER:
            raise Malformed(f"v5 header cut at {len(data)} of {V5_HEADER} bytes")
        _, count, uptime, secs, nsecs, _, etype, eid, samp = struct.unpack_from("!HHIIIIBBH", data)
        have = (len(data) - V5_HEADER) // V5_RECORD
        if count == 0 or count > have:
            raise Malformed(f"v5 header says {count} records, datagram holds {have}")
        export_ns = secs * 1_000_000_000 + nsecs
        interval = samp & 0x3FFF
        rate = interval if interval > 1 else 1
        domain = etype << 8 | eid
        exp_id = self.out.exporter(exporter)
        for i in range(count):
            o = V5_HEADER + i * V5_RECORD
            rec = struct.unpack_from("!4s4s4sHHIIIIHHBBBB", data, o)
            src, dst, _, _, _, pkts, octets, first, last, sport, dport, _, flags, proto, _ = rec
            start = export_ns - _uptime_delta(uptime, first) * MS
            end = export_ns - _uptime_delta(uptime, last) * MS
            self.out.add_row(
                (start, end, *addr_pair(src), *addr_pair(dst), sport, dport, proto, flags)
                + (pkts * rate, octets * rate, exp_id, domain, rate)
            )
        res.flows += count
        return V5_HEADER + count * V5_RECORD

    def _v9_ipfix(self, data: bytes, exporter: str, version: int, res: DatagramResult) -> int:
        if version == 9:
            if len(data) < V9_HEADER:
                raise Malformed(f"v9 header cut at {len(data)} of {V9_HEADER} bytes")
            _, _, uptime, secs, _, domain = struct.unpack_from("!HHIIII", data)
            end, off, uptime_ms = len(data), V9_HEADER, uptime
        else:
            if len(data) < IPFIX_HEADER:
                raise Malformed(f"IPFIX header cut at {len(data)} of {IPFIX_HEADER} bytes")
            _, length, secs, _, domain = struct.unpack_from("!HHIII", data)
            if length > len(data):
                raise Malformed(f"IPFIX header says {length} bytes, datagram has {len(data)}")
            if length < IPFIX_HEADER:
                raise Malformed(f"IPFIX header says {length} bytes, less than a header")
            end, off, uptime_ms = length, IPFIX_HEADER, None
        plan: list[tuple[Key, Template | None, bytes | None, list[dict[int, object]]]] = []
        staged: dict[Key, Template | None] = {}
        while off < end:  # first the whole message, without touching the decoder's state
            if end - off < 4 or not any(data[off:end]):
                break  # padding after the last set
            sid, slen = struct.unpack_from("!HH", data, off)
            if slen < 4 or off + slen > end:
                raise Malformed(f"set {sid} at byte {off} claims {slen} bytes, {end - off} left")
            body = data[off + 4 : off + slen]
            off += slen
            opts = version == 9 and sid == 1 or version == 10 and sid == 3
            if opts or version == 9 and sid == 0 or version == 10 and sid == 2:
                for tid, tpl in self._templates(body, version, options=opts):
                    staged[exporter, version, domain, tid] = tpl
                    plan.append(((exporter, version, domain, tid), tpl, None, []))
            elif sid >= 256:
                key = (exporter, version, domain, sid)
                tpl = staged[key] if key in staged else self.templates.get(key)
                # a record cut short raises here, before anything is committed
                plan.append((key, tpl, body, [] if tpl is None else _values(body, tpl)))
            # other set ids (IPFIX 4-255, v9 2-255) are reserved: skipped by length
        ctx = Context(
            exporter, self.out.exporter(exporter), version, domain, secs * 10**9, uptime_ms, res
        )
        for key, tpl, body, values in plan:  # then commit it, set by set in order
            if body is None:
                self._add_template(key, tpl, ctx)
            elif tpl is None:
                self._wait(key, body, ctx)
            else:
                self._commit(body, tpl, values, ctx)
        return end

    # -- templates -----------------------------------------------------------------------
    @staticmethod
    def _templates(body: bytes, version: int, options: bool) -> list[tuple[int, Template | None]]:
        """The (template id, template) records of a template set; None: an IPFIX
        withdrawal. Reads only ``body``."""
        p, n, v9 = 0, len(body), version == 9
        out: list[tuple[int, Template | None]] = []
        while n - p >= 4:
            if v9 and options:
                if n - p < 6:
                    break
                tid, scope_len, opt_len = struct.unpack_from("!HHH", body, p)
                p += 6
                if tid == 0 and scope_len == 0:
                    break  # padding
                if p + scope_len + opt_len > n:
                    raise Malformed(f"v9 options template {tid} cut short")
                specs = []
                for k in range(0, scope_len - scope_len % 4, 4):
                    typ, ln = struct.unpack_from("!HH", body, p + k)
                    specs.append((typ if typ > 5 else -1, ln))  # scope types 1-5 are not IEs
                p += scope_len
                for k in range(0, opt_len - opt_len % 4, 4):
                    specs.append(struct.unpack_from("!HH", body, p + k))
                p += opt_len
            else:
                tid, count = struct.unpack_from("!HH", body, p)
                p += 4
                if tid == 0 and count == 0:
                    break  # padding
                if options and not v9:
                    if n - p < 2:
                        raise Malformed(f"IPFIX options template {tid} cut short")
                    p += 2  # scope field count: scope fields are IEs, read like the others
                if not v9 and count == 0:
                    out.append((tid, None))  # withdrawal
                    continue
                specs = []
                for _ in range(count):
                    if n - p < 4:
                        raise Malformed(f"template {tid} cut short after {len(specs)} fields")
                    fid, ln = struct.unpack_from("!HH", body, p)
                    p += 4
                    if not v9 and fid & 0x8000:  # enterprise element: PEN follows, skip it
                        if n - p < 4:
                            raise Malformed(f"template {tid} cut inside an enterprise number")
                        p += 4
                        fid = -1
                    specs.append((fid, ln))
            if tid < 256:
                raise Malformed(f"template id {tid} below 256")
            out.append((tid, Template(tid, tuple(specs), options)))
        return out

    def _add_template(self, key: Key, tpl: Template | None, ctx: Context) -> None:
        """Cache (or, for None, withdraw) a template; decode the sets that waited for it."""
        if tpl is None:
            self.templates.pop(key, None)
            return
        self.templates[key] = tpl
        self.seen_templates.add(key)
        ctx.result.templates += 1
        waiting = self.pending.pop(key, [])
        for body, wctx in waiting:
            wctx.result.pending_sets -= 1
            self.domains[key[:3]].pending -= 1
            try:
                self._commit(body, tpl, _values(body, tpl), wctx)
            except Malformed as exc:  # its datagram was committed when it came
                self._bad(wctx.result, "malformed", str(exc))

    # -- data ----------------------------------------------------------------------------
    def _wait(self, key: Key, body: bytes, ctx: Context) -> None:
        """Keep a data set whose template is unknown until the template comes."""
        dom = self.domains[key[:3]]
        if dom.pending >= MAX_PENDING:
            self.out.undecodable["no template (buffer full)"] += 1
            ctx.result.reasons.append(f"template {key[3]} unknown and the wait buffer is full")
            return
        dom.pending += 1
        ctx.result.pending_sets += 1
        self.pending[key].append((body, ctx))

    def _commit(self, body: bytes, tpl: Template, values: list[dict[int, object]],
                ctx: Context) -> None:
        """The records of a decoded data set (``values``: :func:`_values` of ``body``)."""
        if tpl.min_len == 0:
            if any(body):
                self.out.undecodable["template of zero-length records"] += 1
                ctx.result.reasons.append(f"template {tpl.tid} describes zero-length records")
            return
        dom = self.domains[(ctx.exporter, ctx.version, ctx.domain)]
        for v in values:
            self._record(v, tpl, ctx, dom)

    def _record(self, v: dict, tpl: Template, ctx: Context, dom: DomainState) -> None:
        if not tpl.is_flow:
            ctx.result.option_records += 1
            self._options(v, dom)
            return
        rate = F.sampling_rate(v)
        sid = v.get(F.SAMPLER_ID, v.get(F.SELECTOR_ID))
        wait = False
        if not rate and sid:  # sampler 0: none
            rate = dom.samplers.get(int(sid), 0)
            wait = not rate  # rescaled when the sampler's options record arrives
        rate = rate or dom.default_rate or 1
        start, end = self._times(v, ctx, dom)
        src = v.get(F.SRC_V4) or v.get(F.SRC_V6) or (0, 0)
        dst = v.get(F.DST_V4) or v.get(F.DST_V6) or (0, 0)
        proto = v.get(F.PROTO, 0) & 0xFF
        sport, dport, flags = v.get(F.SRC_PORT, 0), v.get(F.DST_PORT, 0), v.get(F.TCP_FLAGS, 0)
        pkts = next((v[f] for f in F.PACKETS_IDS if f in v), None)
        octets = next((v[f] for f in F.BYTES_IDS if f in v), None)
        if F.FRAME_SECTION in v:  # a sampled packet's headers: one packet
            k = parse_frame(v[F.FRAME_SECTION])
            if src == (0, 0) and dst == (0, 0):
                src, dst, proto, sport, dport, flags = (
                    k.src,
                    k.dst,
                    k.proto,
                    k.sport,
                    k.dport,
                    k.flags,
                )
            pkts = 1 if pkts is None else pkts
            octets = (k.ip_len or v.get(F.FRAME_SIZE, 0)) if octets is None else octets
        if proto in ICMP and not dport:
            dport = v.get(F.ICMP_TYPE_CODE[0], v.get(F.ICMP_TYPE_CODE[1], 0))
        pkts, octets = pkts or 0, octets or 0
        if wait:
            dom.waiting.setdefault(int(sid), []).append((len(self.out.rows), pkts, octets))
        self.out.add_row(
            (start, end, *src, *dst, sport & 0xFFFF, dport & 0xFFFF, proto, flags & 0xFF)
            + (pkts * rate, octets * rate, ctx.exp_id, ctx.domain, rate)
        )
        ctx.result.flows += 1

    def _options(self, v: dict, dom: DomainState) -> None:
        """An options record: a sampling rate (per sampler, or the domain's default) and
        the system init time; flows that waited for this sampler are rescaled now."""
        rate = F.sampling_rate(v)
        if rate:
            sid = v.get(F.SAMPLER_ID, v.get(F.SELECTOR_ID))
            if sid is None:
                dom.default_rate = rate
            else:
                dom.samplers[int(sid)] = rate
                rows = self.out.rows
                for i, pkts, octets in dom.waiting.pop(int(sid), []):
                    r = rows[i]
                    rows[i] = r[:10] + (pkts * rate, octets * rate) + r[12:14] + (rate,)
        if F.SYS_INIT_MS in v:
            dom.sys_init_ns = v[F.SYS_INIT_MS] * MS

    def _times(self, v: dict, ctx: Context, dom: DomainState) -> tuple[int, int]:
        start = end = None
        for s_id, e_id, scale in ((F.START_MS, F.END_MS, MS), (F.START_S, F.END_S, 10**9)):
            if start is None and s_id in v:
                start = v[s_id] * scale
            if end is None and e_id in v:
                end = v[e_id] * scale
        for s_id, e_id in ((F.START_NS, F.END_NS), (F.START_US, F.END_US)):
            if start is None and s_id in v:
                start = F.ntp_to_ns(v[s_id])
            if end is None and e_id in v:
                end = F.ntp_to_ns(v[e_id])
        if start is None and F.START_DELTA_US in v:
            start = ctx.export_ns - v[F.START_DELTA_US] * US
        if end is None and F.END_DELTA_US in v:
            end = ctx.export_ns - v[F.END_DELTA_US] * US
        up_s, up_e = v.get(F.START_UPTIME), v.get(F.END_UPTIME)
        if (start is None or end is None) and (up_s is not None or up_e is not None):
            if ctx.uptime_ms is not None:  # v9: relative to the header's uptime

                def at(ms: int) -> int:
                    return ctx.export_ns - _uptime_delta(ctx.uptime_ms, ms) * MS
            else:
                boot = v[F.SYS_INIT_MS] * MS if F.SYS_INIT_MS in v else dom.sys_init_ns
                if boot is None:
                    self.out.notes["sysUpTime times without systemInitTime: end at export"] += 1
                    last = up_e if up_e is not None else up_s
                    boot = ctx.export_ns - last * MS

                def at(ms: int) -> int:
                    return boot + ms * MS

            if start is None and up_s is not None:
                start = at(up_s)
            if end is None and up_e is not None:
                end = at(up_e)
        dur = (
            v[F.DURATION_MS] * MS
            if F.DURATION_MS in v
            else (v[F.DURATION_US] * US if F.DURATION_US in v else None)
        )
        if start is None and end is None and F.OBSERVATION_MS in v:
            start = v[F.OBSERVATION_MS] * MS
        if dur is not None:
            if end is None and start is not None:
                end = start + dur
            elif start is None and end is not None:
                start = end - dur
        if start is None and end is None:
            self.out.notes["no time fields: export time used"] += 1
            start = end = ctx.export_ns
        return (start if start is not None else end), (end if end is not None else start)

    # -- end -----------------------------------------------------------------------------
    def finish(self, kind: str = "export") -> FlowTable:
        """Report data sets whose template never came, and return the table."""
        for key, waiting in self.pending.items():
            exporter, version, domain, tid = key
            for _, ctx in waiting:
                ctx.result.pending_sets -= 1
                ctx.result.reasons.append(
                    f"template {tid} never arrived (exporter {exporter}, domain {domain})"
                )
                self.out.undecodable["no template (data sets)"] += 1
        self.pending.clear()
        for dom in self.domains.values():
            for sid, rows in dom.waiting.items():
                self.out.notes[f"flows naming sampler {sid}, never described: not rescaled"] += len(
                    rows
                )
            dom.waiting.clear()
        return self.out.table(kind, templates=len(self.seen_templates), datagrams=self.results)


def _values(body: bytes, tpl: Template) -> list[dict[int, object]]:
    """The wanted fields of every record of a data set (reads only ``body``; raises
    :class:`Malformed` for a record that runs past its set)."""
    n, out = len(body), []
    if tpl.min_len == 0:
        return out
    if tpl.fixed:
        rl = tpl.min_len
        return [{fid: _value(body[o + off : o + off + ln], fid) for off, ln, fid in tpl.plan}
                for o in range(0, n - rl + 1, rl)]
    p = 0
    while n - p >= tpl.min_len and any(body[p:]):
        v = {}
        for fid, ln in tpl.fields:
            if ln == 0xFFFF:
                if p >= n:
                    raise Malformed(f"template {tpl.tid}: variable-length field past the set")
                ln, p = body[p], p + 1
                if ln == 255:
                    if p + 2 > n:
                        raise Malformed(f"template {tpl.tid}: variable length cut")
                    ln, p = struct.unpack_from("!H", body, p)[0], p + 2
            if p + ln > n:
                raise Malformed(f"template {tpl.tid}: record runs past its set")
            if fid in F.WANTED:
                v[fid] = _value(body[p : p + ln], fid)
            p += ln
        out.append(v)
    return out


def _uptime_delta(uptime_ms: int, at_ms: int) -> int:
    """Milliseconds from ``at_ms`` to the export, both on the 32-bit uptime clock."""
    d = (uptime_ms - at_ms) & 0xFFFFFFFF
    return d - (1 << 32) if d >= 1 << 31 else d


def _value(raw: bytes, fid: int) -> object:
    if fid == F.FRAME_SECTION:
        return raw
    if fid in F.ADDRESS_IDS:
        if len(raw) in (4, 16):
            return addr_pair(raw) if any(raw) else None
        return None
    return int.from_bytes(raw, "big")
