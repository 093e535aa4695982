#!/usr/bin/env bash
# The main job: installs what it needs (idempotent), then runs the demo on a
# bundled real capture: trace summary, Swing model extraction, a short
# dumbbell study (httperf under no / Poisson / Swing background), the report.
# Output goes to ./out/demo (override with OUT=...).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
scripts/bootstrap.sh
export PATH="$PWD/.venv/bin:$PATH"
out="${OUT:-$PWD/out/demo}"
trace="data/pcap/example.pcap"
mkdir -p "$out"
echo "== swell trace info $trace"
swell trace info "$trace"
