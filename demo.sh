#!/usr/bin/env bash
# The main job: installs what it needs (idempotent), then runs the demo on a
# bundled real capture: trace summary, Swing model extraction, a short
# dumbbell study (httperf fetching 1 MB objects over a 20 Mbit/s bottleneck
# under no background, Poisson and Swing background of the same mean rate, and
# Swing at 4x the load), and its report. Output goes to ./out/demo (override
# with OUT=...); the report is out/demo/study/report/index.html.
# Re-running continues an interrupted study; `rm -rf out/demo` starts afresh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
scripts/bootstrap.sh
export PATH="$PWD/.venv/bin:$PATH"
out="${OUT:-$PWD/out/demo}"
trace="data/pcap/example.pcap"
mkdir -p "$out"
echo "== swell doctor"
swell doctor
echo "== swell trace info $trace"
swell trace info "$trace"
echo "== swell extract $trace -o $out/model"
swell extract "$trace" -o "$out/model"
echo "== swell model show $out/model"
swell model show "$out/model" --plots "$out/model/plots"
echo "== swell run experiments/demo.yaml (about 4 minutes)"
swell run experiments/demo.yaml -o "$out/study"
echo "== done: open $out/study/report/index.html"
