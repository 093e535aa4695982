"""swell.extract.flows: flow records from what users have.

One reader, :func:`read_flows`, turns any of these into one
:class:`FlowTable` of numpy columns (start/end ns, src/dst address as 128-bit
hi/lo pairs, ports, protocol, OR-ed TCP flags, packets, bytes, exporter,
observation domain, sampling rate applied):

* nfcapd files, through Debian's ``nfdump`` (:mod:`.nfcapd`);
* NetFlow v5, v9 and IPFIX export datagrams: captured in a pcap, stored one per
  file, or received by a UDP collector swell runs for a given time
  (:mod:`.sources`), decoded by swell's own decoder (:mod:`.decoder`; why not
  a library: ``docs/flows.md``);
* flows made from a packet capture, by swell's connection tracker
  (:mod:`.tracker`: per direction records cut at the inactive and active
  timeouts, as an exporter cuts them) or by ``nfpcapd``;
* a flow file swell wrote (``swell flows read|collect -o FILE.npz``).

:mod:`.timecheck` screens the times (bogus exporter clocks, spans no model
can use) for the Harpoon fit; :mod:`.compare` measures the decoder against
other decoders and nfdump, field by field.

The CLI is :mod:`swell.extract.flows_cli` (``swell flows read|collect``).
"""

from swell.extract.flows.decoder import ExportDecoder
from swell.extract.flows.reader import FORMATS, concat, detect_format, read_flows
from swell.extract.flows.table import COLUMNS, DatagramResult, FlowTable

__all__ = [
    "COLUMNS",
    "FORMATS",
    "DatagramResult",
    "ExportDecoder",
    "FlowTable",
    "concat",
    "detect_format",
    "read_flows",
]
