#!/usr/bin/env bash
# The waiter-count sweep: fairsem_bench_drain at N = 10, 1,000, 10,000 and 100,000 waiters of
# one Client on limit 1, each released as soon as it is granted, on a private redis-server (or
# FAIRSEM_BENCH_URL's). Prints a table, and plots hand-off and Redis CPU per grant against N to
# docs/img/waiter_sweep.png (gnuplot, installed when missing).
#
#   bash tests/bench/drain_sweep.sh [BUILD_DIR]     # BUILD_DIR: a bench preset build (build/bench)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
cd "$FAIRSEM_ROOT"
build=${1:-build/bench}
bench=$(fairsem_bench_binary "$build" fairsem_bench_drain) || exit 2
fairsem_ensure_packages gnuplot-nox
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bench" --benchmark_format=json >"$work/drain.json"
python3 - "$work/drain.json" >"$work/drain.dat" <<'PY'
import json, sys
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    print(int(b["waiters"]), b["handoff_us"], b["redis_cpu_us_per_grant"], b["drain_s"],
          b["queue_s"], int(b["calls_over_1ms"]), int(b["threads"]), int(b["connections"]),
          b["rss_bytes_per_waiter"])
PY
printf '%-8s %12s %22s %9s %9s %13s %8s %12s %14s\n' waiters "hand-off µs" "Redis CPU µs/grant" \
  "drain s" "queue s" "calls > 1 ms" threads connections "RSS B/waiter"
awk '{printf "%-8d %12.0f %22.0f %9.2f %9.2f %13d %8d %12d %14.0f\n", $1,$2,$3,$4,$5,$6,$7,$8,$9}' \
  "$work/drain.dat"
mkdir -p docs/img
gnuplot <<GP
set terminal pngcairo size 900,520 font ",10"
set output 'docs/img/waiter_sweep.png'
set title 'N waiters of one Client on limit 1, each released on its grant'
set xlabel 'waiters (log scale)'; set ylabel 'microseconds per grant'
set logscale x; set grid; set yrange [0:*]; set key top right
plot '$work/drain.dat' using 1:2 with linespoints lw 2 title 'hand-off (drain time / N)', \
     '' using 1:3 with linespoints lw 2 title 'Redis CPU per grant'
GP
echo "plot: docs/img/waiter_sweep.png"
