#!/bin/bash
# bench-like loop behind docs/scale.md 7.3 (2026-12-01 05:54-06:07 UTC, AMD EPYC 2 cores): test_scale's experiment, seeds 1-5, no selection; the table is draws-15-30s.txt (delivered / asked per direction, cut connections / started, problems raised)
# short windows: rre_draw independent vs session, seeds 1-5, test_scale's experiment (30 Mbit/s)
cd /work/runs/s42/short
for dur in 15 30; do
for draw in independent session; do
for seed in 1 2 3 4 5; do
  d=$draw-$dur-s$seed
  cat > $d.yaml <<EOT
name: short-$draw
duration_s: $dur
warmup_s: 5
seed: $seed
topology:
  network: 10.81.0.0/16
  bottleneck: {rate_mbps: 100, delay_ms: 2, queue_bytes: 300000}
foreground: {kind: none}
background: {kind: swing, trace: /work/main/data/pcap/example.pcap, rre_draw: $draw, variant: {target_mbps: 30}}
EOT
  SWELL_QUIET=1 /work/main/.venv/bin/swell run $d.yaml -o $d > $d.log 2>&1
  echo "$d rc=$?"
done; done; done
