#!/usr/bin/env bash
# The comparison harness: fairsem beside the raw Redis floor and the most-used peer (npm
# redis-semaphore on ioredis), measured in one run against one private Redis, then written up
# as docs/benchmark-run.md with two plots (docs/img/wait_cdf.png, docs/img/queue_cost.png) by
# compare_report.sh, which this script sources once the runs are done. docs/benchmarks.md, the
# reading of those figures, is kept by hand.
#
#   bash tests/bench/compare.sh              # about 3 minutes
#   SECONDS_PER_RUN=20 bash tests/bench/compare.sh
#   COMPARE_OUT=/tmp/b/benchmark-run.md bash tests/bench/compare.sh   # write-up (and img/) elsewhere
#   COMPARE_KEEP_WORK=1 bash tests/bench/compare.sh  # keep the JSON figures and grant records
#
# It builds the benchmarks (cmake preset "bench"), starts redis-server on a free loopback port,
# measures the floor with redis-benchmark, installs the peer into a temp dir (never into the
# repository; skipped with a message where npm is missing) and runs every scenario against
# both. Not part of CI: figures need a quiet machine, and CI only checks that the benchmark
# programs still run.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
cd "$FAIRSEM_ROOT"

RUN_SECONDS=${SECONDS_PER_RUN:-10}
CLIENTS=8
# The weighted scenario (issue 16): $CLIENTS processes, client i asking for WEIGHTS[i % 2] units
# of WEIGHTED_LIMIT. A grant counts as out of FIFO order when an earlier request (asked more than
# 100 µs before it) was still waiting more than GRANT_TOLERANCE_US after it: one release can
# promote several waiters, which then wake in any order; 1 ms is target 2's hand-off p99 bound.
WEIGHTS=1,4
WEIGHTED_LIMIT=8
GRANT_TOLERANCE_US=1000
OUT=${COMPARE_OUT:-docs/benchmark-run.md}
IMG=$(dirname "$OUT")/img
BIN=build/bench/tests/bench

fairsem_ensure_packages gnuplot-nox jq
fairsem_log "building the benchmarks (build/bench)"
cmake --preset bench >/dev/null
cmake --build build/bench -j "$(fairsem_jobs)" --target fairsem_bench_uncontended \
  fairsem_bench_queue fairsem_bench_renew fairsem_contention >/dev/null

work=$(mktemp -d /tmp/fairsem-compare.XXXXXX)
redis_pid=
cleanup() {
  [ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
  # COMPARE_KEEP_WORK=1 keeps the JSON figures and grant records of the run.
  if [ "${COMPARE_KEEP_WORK:-0}" = 1 ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

fairsem_start_redis "$work"
redis_pid=$FAIRSEM_REDIS_PID port=$FAIRSEM_REDIS_PORT
export FAIRSEM_BENCH_URL="redis://127.0.0.1:$port"
rcli() { redis-cli -p "$port" "$@"; }
fairsem_log "private redis-server on 127.0.0.1:$port"

# --- The floor: one-line EVALSHA (and PING) from redis-benchmark, one client, no pipelining.
sha=$(rcli script load "return 1")
bench_p50() {  # prints p50 ms of the command given
  redis-benchmark -p "$port" -c 1 -P 1 -n 100000 --csv "$@" | tail -n 1 |
    awk -F'","' '{ print $5 }'
}
floor_ms=$(bench_p50 evalsha "$sha" 0)
ping_ms=$(bench_p50 ping)
floor_us=$(awk -v m="$floor_ms" 'BEGIN { printf "%.1f", m * 1000 }')
ping_us=$(awk -v m="$ping_ms" 'BEGIN { printf "%.1f", m * 1000 }')
fairsem_log "floor: EVALSHA p50 $floor_us us, PING p50 $ping_us us"

# --- fairsem: Google Benchmark programs (JSON) and the contention program (JSON lines).
gb() {  # program filter -> JSON file
  "$BIN/$1" --benchmark_min_time="${2:-2}" --benchmark_format=json >"$work/$1.json" 2>/dev/null
}
fairsem_log "fairsem: uncontended pair"
gb fairsem_bench_uncontended 3
fairsem_log "fairsem: queue length 10, 1,000, 100,000"
gb fairsem_bench_queue 3
fairsem_log "fairsem: renewal of 10,000 permits"
gb fairsem_bench_renew 2
rcli flushall >/dev/null
for mode in threads processes; do
  fairsem_log "fairsem: contention, $CLIENTS clients as $mode, limit 1, 1 ms hold, ${RUN_SECONDS} s"
  "$BIN/fairsem_contention" --clients "$CLIENTS" --limit 1 --hold-ms 1 --seconds "$RUN_SECONDS" \
    --mode "$mode" --records "$work/fairsem-$mode.csv" >"$work/fairsem-$mode.json"
done
fairsem_log "fairsem: weighted, $CLIENTS processes asking $WEIGHTS units of limit $WEIGHTED_LIMIT, 1 ms hold, ${RUN_SECONDS} s"
"$BIN/fairsem_contention" --name weighted --clients "$CLIENTS" --limit "$WEIGHTED_LIMIT" \
  --weights "$WEIGHTS" --hold-ms 1 --seconds "$RUN_SECONDS" --mode processes \
  --fifo-grant-tolerance-us "$GRANT_TOLERANCE_US" --records "$work/fairsem-weighted.csv" \
  >"$work/fairsem-weighted.json"

# --- The peer, installed into the temp dir.
peer=none
peer_version=
if command -v npm >/dev/null && command -v node >/dev/null; then
  fairsem_log "installing the peer (npm redis-semaphore, ioredis) into $work/peer"
  mkdir -p "$work/peer"
  if (cd "$work/peer" && npm init -y >/dev/null && npm install --no-audit --no-fund \
        redis-semaphore@5 ioredis >/dev/null 2>"$work/npm.log"); then
    peer=redis-semaphore
    export FAIRSEM_PEER_MODULES="$work/peer"
    peer_version="redis-semaphore $(jq -r .version "$work/peer/node_modules/redis-semaphore/package.json"), ioredis $(jq -r .version "$work/peer/node_modules/ioredis/package.json"), node $(node --version)"
  else
    echo "npm install failed (see below); the peer is skipped" >&2
    cat "$work/npm.log" >&2
  fi
else
  echo "npm or node is not installed: the peer (npm redis-semaphore) is skipped" >&2
fi
PEER_JS=tests/bench/peer/peer.mjs
if [ "$peer" != none ]; then
  fairsem_log "peer: uncontended pair"
  # Its Redis time per pair, as for fairsem's: the top-level commands it sends (EVALSHA to
  # acquire, ZREM to release; commands its scripts run are inside EVALSHA's time).
  rcli config resetstat >/dev/null
  node "$PEER_JS" pair --port "$port" --iterations 20000 >"$work/peer-pair.json"
  rcli info commandstats | tr -d '\r' |
    awk -F'[:=,]' '/^cmdstat_(evalsha|eval|zrem):/ { usec += $5 } END { print usec / 20000 }' \
      >"$work/peer-pair-redis-us.txt"
  for mode in threads processes; do
    fairsem_log "peer: contention, $CLIENTS clients as $mode, limit 1, 1 ms hold, ${RUN_SECONDS} s"
    "$BIN/fairsem_contention" --impl redis-semaphore --mode "$mode" --clients "$CLIENTS" \
      --limit 1 --hold-ms 1 --seconds "$RUN_SECONDS" --records "$work/peer-$mode.csv" \
      --external "node $PEER_JS contention --port $port --clients $CLIENTS --limit 1 --hold-ms 1 --seconds $RUN_SECONDS --mode $mode --out $work/peer-$mode.csv >/dev/null" \
      >"$work/peer-$mode.json"
  done
  fairsem_log "peer: weighted (MultiSemaphore), $CLIENTS processes asking $WEIGHTS units of limit $WEIGHTED_LIMIT, 1 ms hold, ${RUN_SECONDS} s"
  "$BIN/fairsem_contention" --impl redis-semaphore --mode processes --clients "$CLIENTS" \
    --limit "$WEIGHTED_LIMIT" --weights "$WEIGHTS" --hold-ms 1 --seconds "$RUN_SECONDS" \
    --fifo-grant-tolerance-us "$GRANT_TOLERANCE_US" --records "$work/peer-weighted.csv" \
    --external "node $PEER_JS contention --port $port --key bench-weighted --clients $CLIENTS --limit $WEIGHTED_LIMIT --weights $WEIGHTS --hold-ms 1 --seconds $RUN_SECONDS --mode processes --out $work/peer-weighted.csv >/dev/null" \
    >"$work/peer-weighted.json"
fi

# --- The write-up: figures, plots and the markdown (compare_report.sh).
# shellcheck source=compare_report.sh
source "$FAIRSEM_ROOT/tests/bench/compare_report.sh"
