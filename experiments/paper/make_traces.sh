#!/bin/sh
# Build the many-user composites that stand in for the paper's Mawi and Mawi2
# traces (seed 004, Table 2), from the shared real captures in
# ../shared/data beside the checkout (SHARED_DATA overrides). The Auck stand-in is the bundled
# data/pcap/example.pcap and needs no building.
#
#   mawi2.pcap: nDPI 443-firefox + opera-vpn, 16 users each, 60 s. Both are
#     downloads-heavy TLS sessions (87% of the bytes server -> client), as
#     Mawi2 is (10.8 of 11.9 Mbit/s in Dir0: HTTP and NNTP downloads).
#   mawi.pcap: PcapPlusPlus tls2 (334 TLS conversations of two clients, its
#     IPv4 part), 16 users, 150 s: all TCP, 31% of the bytes client ->
#     server (alexa-app's share, 33%, without its losses), for Mawi's heavy
#     reverse direction (10 of 17.8 Mbit/s: HTTP and RSYNC); the
#     figure files scale its requests further to Table 2's split. (It replaced
#     nDPI alexa-app + nintendo, whose model carried UDP exchanges that time
#     out and 5% loss on the median server's path, and delivered 30-37% of
#     its load: docs/paper.md.)
#
# Deterministic (fixed seeds). The composites are not committed (the nDPI
# captures may be read from the shared folder, not copied into the project);
# they land in out/paper/traces/, which the figure files name.
#
#   experiments/paper/make_traces.sh            # from the repository root
set -eu
cd "$(dirname "$0")/../.."
SRC="${SHARED_DATA:-$PWD/../shared/data}/pcap"
OUT=out/paper/traces
SWELL="${SWELL:-.venv/bin/swell}"
for f in ndpi/443-firefox.pcap ndpi/opera-vpn.pcapng pcapplusplus/tls2.pcap; do
    if [ ! -f "$SRC/$f" ]; then
        echo "make_traces.sh: $SRC/$f: missing (the shared captures are needed; set SHARED_DATA)" >&2
        exit 2
    fi
done
mkdir -p "$OUT"
"$SWELL" trace compose "$OUT/mawi2.pcap" "$SRC/ndpi/443-firefox.pcap" "$SRC/ndpi/opera-vpn.pcapng" \
    --copies 16 --span 60 --seed 7 --force
"$SWELL" trace compose "$OUT/mawi.pcap" "$SRC/pcapplusplus/tls2.pcap" \
    --copies 16 --span 150 --seed 7 --force
