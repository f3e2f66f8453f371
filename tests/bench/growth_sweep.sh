#!/usr/bin/env bash
# Does a pair cost Redis more as a semaphore's queue or history grows? Runs fairsem_bench_queue
# (BM_QueueHotPath at 10 to 100,000 waiters, BM_PairAfterGrants after 0 to 10,000,000 pairs; each
# timed pair beside one on a control server, on private redis-servers), prints each case's Redis
# µs per pair and its ratio to the control, and plots the ratios to docs/img/cost_growth.png
# (gnuplot, installed when missing), with the 1.2 x target. About 12 minutes a run, most of it
# the 10,000,000 pairs of history.
#
#   bash tests/bench/growth_sweep.sh [BUILD_DIR] [RUNS]  # BUILD_DIR: a bench preset build
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
cd "$FAIRSEM_ROOT"
build=${1:-build/bench}
runs=${2:-1}
bench=$(fairsem_bench_binary "$build" fairsem_bench_queue) || exit 2
fairsem_ensure_packages gnuplot-nox
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for run in $(seq 1 "$runs"); do
  "$bench" --benchmark_format=json >"$work/run$run.json"
done
# One line per case and run: kind (queue, history), x, label, pair µs, control µs, ratio, run.
python3 - "$work"/run*.json >"$work/growth.dat" <<'PY'
import json, sys
for run, path in enumerate(sys.argv[1:], 1):
    for b in json.load(open(path))["benchmarks"]:
        pair = b["acquire_redis_us"] + b["release_redis_us"]
        if "waiters" in b:
            n = int(b["waiters"])
            print("queue", n, f"{n:,}", pair, b["control_pair_redis_us"], b["pair_vs_control"], run)
        else:
            n = int(b["pairs_before"])
            label = f"{n // 1_000_000}M" if n >= 1_000_000 else str(n)
            if b["receipts_expired"]:
                label += ",expired"
            print("history", n, label, pair, b["control_pair_redis_us"], b["pair_vs_control"],
                  run)
PY
printf '%-8s %-14s %14s %17s %16s %4s\n' case "N" "pair Redis µs" "control Redis µs" \
  "pair / control" run
awk '{printf "%-8s %-14s %14.1f %17.1f %16.2f %4d\n", $1, $3, $4, $5, $6, $7}' "$work/growth.dat"
grep '^queue' "$work/growth.dat" >"$work/queue.dat"
# The history's cases at 0, 1, 2, 3 on the x axis (each run's at its case's place).
grep '^history' "$work/growth.dat" | awk '!($3 in at) { at[$3] = n++ } { print at[$3], $0 }' \
  >"$work/history.dat"
mkdir -p docs/img
gnuplot <<GP
set terminal pngcairo size 1000,420 font ",10"
set output 'docs/img/cost_growth.png'
set multiplot layout 1,2 title "Redis time per pair over a control's (10 waiters, no history), one semaphore on limit 1"
set grid; set yrange [0:1.6]; set key bottom right
set title 'A long queue: the hot path (queue one, release the holder)'
set xlabel 'waiters (log scale)'; set ylabel 'pair / control'
set logscale x; set xrange [5:200000]
plot '$work/queue.dat' using 2:6 with points pt 7 ps 1.2 title 'pair / control', \
     1.2 with lines dt 2 lw 2 title 'target 1.2'
unset logscale x
set title 'A long history: an uncontended pair'
set xlabel 'pairs before (receipts live for 60 s)'
set xrange [-0.5:3.5]
plot '$work/history.dat' using 1:7:xtic(4) with points pt 7 ps 1.2 title 'pair / control', \
     1.2 with lines dt 2 lw 2 title 'target 1.2'
unset multiplot
GP
echo "plot: docs/img/cost_growth.png"
