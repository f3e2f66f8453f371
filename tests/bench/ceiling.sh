#!/usr/bin/env bash
# The throughput ceiling (issue 30 item 3): the grants/s one Redis sustains and the Redis CPU
# each grant costs, for fairsem and beside it the npm peer (redis-semaphore on ioredis), on one
# private server; with --cluster, on a private 3-master Redis Cluster, with each master's share
# of the grants and of the CPU. Prints a Markdown table (docs/benchmarks.md#throughput-ceiling
# says how to read it).
#
#   bash tests/bench/ceiling.sh                       # one redis-server, 4 runs of 10 s
#   bash tests/bench/ceiling.sh --cluster             # a private 3-master cluster
#   bash tests/bench/ceiling.sh --seconds 3 --build-dir build/bench-ceiling
#   bash tests/bench/ceiling.sh --baseline /tmp/fairsem_bench_ceiling.old  # A/B a change
#
# Each run, for each library and mode: FLUSHALL and CONFIG RESETSTAT on every master, then
# --processes processes (4) of --threads threads (16) each start at once: fairsem_bench_ceiling
# (one Client per process) or `node peer.mjs ceiling` (one ioredis connection per process).
# They open their semaphores first, then all start at a common instant (CEILING_START_DELAY_MS,
# 3000, after launch) and loop acquire -> release for --seconds. Redis's CPU (INFO cpu:
# used_cpu_sys + used_cpu_user, the whole redis-server) is read at that instant and at the
# window's end, so opening the semaphores is not counted; grants are those whose release
# returned inside the window. Modes:
#   uncontended  1,000 semaphores of limit 64; each acquire picks one at random: nobody waits.
#   contended    16 semaphores of limit 1; thread t of every process takes semaphore t % 16, so
#                four threads (one per process) queue for each: nearly every grant is a hand-off.
# On a cluster the names are spread evenly over the masters (--spread) and each master's grants
# are counted by the slots of the semaphores it serves.
#
# fairsem runs twice: as it is by default, and as fairsem-batched, with ClientOptions::batch_calls
# (--batch-calls): its threads' calls to one node go in batches on one socket at a time.
# --baseline BIN adds baseline-batched: BIN (a fairsem_bench_ceiling built from another commit,
# copied aside) with --batch-calls, run after fairsem-batched, to compare two versions of the
# batching in the same sitting.
#
# CEILING_PEER_CONNECTIONS=16 gives each peer process 16 ioredis connections (loop t on t % 16),
# as fairsem's pool has, instead of one carrying every loop's commands: the one pipelines, which
# spreads Redis's reads and writes over several commands.
#
# Loopback only (127.0.0.1). The peer is installed with npm into a temp dir, never into the
# repository (or taken from FAIRSEM_PEER_MODULES when set); without node and npm it is skipped.
# Not part of CI: figures need a quiet machine.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
cd "$FAIRSEM_ROOT"

cluster=0 seconds=10 processes=4 threads=16 build_dir= baseline=
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; exit "$1"; }
while [ $# -gt 0 ]; do
  case $1 in
    --cluster) cluster=1 ;;
    --seconds) seconds=$2; shift ;;
    --processes) processes=$2; shift ;;
    --threads) threads=$2; shift ;;
    --build-dir) build_dir=$2; shift ;;  # configured already, with FAIRSEM_BUILD_BENCHMARKS=ON
    --baseline) baseline=$2; shift ;;
    -h | --help) usage 0 ;;
    *) echo "ceiling.sh: unknown option $1" >&2; usage 2 ;;
  esac
  shift
done
for n in "$seconds" "$processes" "$threads"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "ceiling.sh: '$n' is not a whole number >= 1" >&2; exit 2; }
done
START_DELAY_MS=${CEILING_START_DELAY_MS:-3000}
PEER_CONNECTIONS=${CEILING_PEER_CONNECTIONS:-1}
UNCONTENDED_SEMAPHORES=1000 UNCONTENDED_LIMIT=64
CONTENDED_SEMAPHORES=16 CONTENDED_LIMIT=1

fairsem_ensure_packages jq
if [ -z "$build_dir" ]; then
  fairsem_log "building fairsem_bench_ceiling (build/bench)"
  cmake --preset bench >/dev/null
  build_dir=build/bench
fi
cmake --build "$build_dir" -j "$(fairsem_jobs)" --target fairsem_bench_ceiling >/dev/null
BIN=$build_dir/tests/bench/fairsem_bench_ceiling
PEER_JS=tests/bench/peer/peer.mjs

work=$(mktemp -d /tmp/fairsem-ceiling.XXXXXX)
server_pid=
pids=()  # the run's client processes, stopped too if the script is interrupted
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  if [ "${CEILING_KEEP_WORK:-0}" = 1 ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

# --- The server: masters.json is [{"port", "slots": [[first, last], ...]}], one per master.
if [ "$cluster" = 1 ]; then
  fairsem_log "starting a private 3-master cluster (fairsem_bench_ceiling --serve-cluster)"
  "$BIN" --serve-cluster >"$work/cluster.json" 2>"$work/cluster.log" &
  server_pid=$!
  for _ in $(seq 1200); do
    [ -s "$work/cluster.json" ] && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/cluster.log" >&2; exit 1; }
    sleep 0.1
  done
  [ -s "$work/cluster.json" ] || { echo "the cluster did not start in 120 s" >&2; exit 1; }
  jq -c '[.masters[] | {port, slots}]' "$work/cluster.json" >"$work/masters.json"
  url=$(jq -r .url "$work/cluster.json")
  # The masters' slot ranges, for --spread: "0-5460,5461-10922,10923-16383".
  spread=$(jq -r '[.[] | [.slots[] | "\(.[0])-\(.[1])"] | join("+")] | join(",")' \
    "$work/masters.json")
  deployment="a private 3-master Redis Cluster (no replicas)"
else
  fairsem_start_redis "$work"
  server_pid=$FAIRSEM_REDIS_PID
  echo "[{\"port\": $FAIRSEM_REDIS_PORT, \"slots\": [[0, 16383]]}]" >"$work/masters.json"
  url="redis://127.0.0.1:$FAIRSEM_REDIS_PORT"
  spread=
  deployment="one private redis-server"
fi
mapfile -t masters < <(jq -r '.[].port' "$work/masters.json")
fairsem_log "$deployment on 127.0.0.1:${masters[*]}"

# --- The peer, installed into the temp dir (or FAIRSEM_PEER_MODULES).
impls=(fairsem fairsem-batched)
if [ -n "$baseline" ]; then
  [ -x "$baseline" ] || { echo "ceiling.sh: --baseline $baseline is not an executable" >&2; exit 2; }
  impls+=(baseline-batched)
fi
peer_version="not measured"
if [ -n "${FAIRSEM_PEER_MODULES:-}" ]; then
  impls+=(peer)
elif command -v npm >/dev/null && command -v node >/dev/null; then
  fairsem_log "installing the peer (npm redis-semaphore, ioredis) into $work/peer"
  mkdir -p "$work/peer"
  if (cd "$work/peer" && npm init -y >/dev/null && npm install --no-audit --no-fund \
        redis-semaphore@5 ioredis cluster-key-slot >/dev/null 2>"$work/npm.log"); then
    export FAIRSEM_PEER_MODULES="$work/peer"
    impls+=(peer)
  else
    echo "npm install failed (see below); the peer is skipped" >&2
    cat "$work/npm.log" >&2
  fi
else
  echo "npm or node is not installed: the peer (npm redis-semaphore) is skipped" >&2
fi
if [[ " ${impls[*]} " == *" peer "* ]]; then
  m=$FAIRSEM_PEER_MODULES/node_modules
  peer_version="redis-semaphore $(jq -r .version "$m/redis-semaphore/package.json"), ioredis $(jq -r .version "$m/ioredis/package.json"), node $(node --version), $PEER_CONNECTIONS connection(s) per process"
fi

now_ms() { date +%s%3N; }
sleep_until_ms() {
  local left=$(($1 - $(now_ms)))
  [ "$left" -gt 0 ] && sleep "$(awk -v l="$left" 'BEGIN { printf "%.3f", l / 1000 }')"
  return 0
}
# Seconds of CPU the redis-server on port $1 has used (its main thread and the others).
cpu_of() {
  redis-cli -p "$1" INFO cpu | tr -d '\r' |
    awk -F: '/^used_cpu_(sys|user):/ { s += $2 } END { printf "%.6f", s }'
}

# run IMPL MODE: one run; appends "impl mode grants grants_by_master cpu_by_master" to
# results.tsv (the last two comma-separated, in the order of masters.json).
run() {
  local impl=$1 mode=$2 sems limit i start out
  if [ "$mode" = uncontended ]; then
    sems=$UNCONTENDED_SEMAPHORES limit=$UNCONTENDED_LIMIT
  else
    sems=$CONTENDED_SEMAPHORES limit=$CONTENDED_LIMIT
  fi
  fairsem_log "$impl, $mode: $processes processes x $threads threads, $sems semaphores of limit $limit, $seconds s"
  for port in "${masters[@]}"; do
    redis-cli -p "$port" FLUSHALL >/dev/null
    redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
  done
  start=$(($(now_ms) + START_DELAY_MS))
  local args=(--mode "$mode" --threads "$threads" --semaphores "$sems" --limit "$limit"
    --seconds "$seconds" --start-at-ms "$start")
  [ -n "$spread" ] && args+=(--spread "$spread")
  pids=()
  for i in $(seq "$processes"); do
    out=$work/$impl-$mode-$i
    if [ "$impl" = fairsem ]; then
      "$BIN" --url "$url" "${args[@]}" >"$out.json" 2>"$out.err" &
    elif [ "$impl" = fairsem-batched ]; then
      "$BIN" --url "$url" "${args[@]}" --batch-calls >"$out.json" 2>"$out.err" &
    elif [ "$impl" = baseline-batched ]; then
      "$baseline" --url "$url" "${args[@]}" --batch-calls >"$out.json" 2>"$out.err" &
    else
      local cluster_arg=()
      [ "$cluster" = 1 ] && cluster_arg=(--cluster yes)
      node "$PEER_JS" ceiling --port "${masters[0]}" "${cluster_arg[@]}" "${args[@]}" \
        --connections "$PEER_CONNECTIONS" >"$out.json" 2>"$out.err" &
    fi
    pids+=($!)
  done
  local before=() after=()
  sleep_until_ms "$start"
  for port in "${masters[@]}"; do before+=("$(cpu_of "$port")"); done
  sleep_until_ms $((start + seconds * 1000))
  for port in "${masters[@]}"; do after+=("$(cpu_of "$port")"); done
  local failed=0
  for i in "${!pids[@]}"; do
    if ! wait "${pids[$i]}"; then
      echo "$impl $mode: process $((i + 1)) failed:" >&2
      cat "$work/$impl-$mode-$((i + 1)).err" >&2
      failed=1
    fi
  done
  pids=()
  [ "$failed" = 0 ] || exit 1
  local late
  late=$(jq -s 'map(.late_ms) | max' "$work/$impl-$mode"-*.json)
  if awk -v l="$late" 'BEGIN { exit !(l > 0) }'; then
    echo "warning: $impl $mode: a process started $late ms late (raise CEILING_START_DELAY_MS)" >&2
  fi
  # Grants by master: each process's grants_by_slot, summed over the master's slot ranges.
  local by_master cpu
  by_master=$(jq -rs --slurpfile m "$work/masters.json" '
    (map(.grants_by_slot | to_entries) | add) as $e
    | [$m[0][] | . as $master
       | [$e[] | (.key | tonumber) as $s
          | select(any($master.slots[]; .[0] <= $s and $s <= .[1])) | .value] | add // 0]
    | join(",")' "$work/$impl-$mode"-*.json)
  cpu=$(paste -d' ' <(printf '%s\n' "${before[@]}") <(printf '%s\n' "${after[@]}") |
    awk '{ printf "%s%.6f", (NR > 1 ? "," : ""), $2 - $1 }')
  printf '%s\t%s\t%s\t%s\t%s\n' "$impl" "$mode" \
    "$(jq -s 'map(.grants) | add' "$work/$impl-$mode"-*.json)" "$by_master" "$cpu" \
    >>"$work/results.tsv"
}

for impl in "${impls[@]}"; do
  for mode in uncontended contended; do run "$impl" "$mode"; done
done

# --- The tables (Markdown, on stdout). A master's ceiling is 1,000,000 / its CPU µs per grant:
# the grants/s at which its one thread would be busy all the time; N masters evenly loaded
# sustain N times the ceiling at the mean cost (docs/benchmarks.md#throughput-ceiling).
echo "## Throughput ceiling: $deployment"
echo
echo "$processes processes x $threads threads per library, $seconds s per run; redis-server" \
  "$(redis-server --version | awk '{ print $3 }'), $(nproc) cores, $(date -u +%F)," \
  "fairsem $(git describe --always --dirty 2>/dev/null || echo '?'); peer: $peer_version."
echo "Uncontended: $UNCONTENDED_SEMAPHORES semaphores of limit $UNCONTENDED_LIMIT, a random one" \
  "per acquire; contended: $CONTENDED_SEMAPHORES of limit $CONTENDED_LIMIT, thread t of each" \
  "process on semaphore t % $CONTENDED_SEMAPHORES."
echo
awk -F'\t' -v seconds="$seconds" -v ports="${masters[*]}" -v cluster="$cluster" '
  function fmt(x) { return x >= 100 ? sprintf("%.0f", x) : sprintf("%.1f", x) }
  {
    key = $1 " " $2; keys[++n] = key; impl[key] = $1; mode[key] = $2; grants[key] = $3
    nm = split($4, g, ","); split($5, c, ","); cpu[key] = 0
    for (m = 1; m <= nm; m++) { mg[key, m] = g[m]; mc[key, m] = c[m]; cpu[key] += c[m] }
  }
  END {
    split(ports, port, " ")
    print "| library | mode | grants | grants/s | Redis CPU (s) | Redis busy (mean per master) | Redis CPU µs/grant | ceiling, " nm " master" (nm > 1 ? "s" : "") " (grants/s) |"
    print "|---|---|---|---|---|---|---|---|"
    for (i = 1; i <= n; i++) {
      k = keys[i]; us[k] = grants[k] > 0 ? cpu[k] * 1e6 / grants[k] : 0
      top[k] = us[k] > 0 ? nm * 1e6 / us[k] : 0
      printf "| %s | %s | %d | %.0f | %.2f | %.0f %% | %s | %.0f |\n", impl[k], mode[k], grants[k],
        grants[k] / seconds, cpu[k], cpu[k] / seconds / nm * 100, fmt(us[k]), top[k]
    }
    if (cluster == 1) {
      print ""
      print "| library | mode | master | grants | share of grants | Redis CPU (s) | share of CPU | busy | CPU µs/grant | ceiling of the master (grants/s) |"
      print "|---|---|---|---|---|---|---|---|---|---|"
      for (i = 1; i <= n; i++) {
        k = keys[i]
        for (m = 1; m <= nm; m++) {
          u = mg[k, m] > 0 ? mc[k, m] * 1e6 / mg[k, m] : 0
          printf "| %s | %s | 127.0.0.1:%s | %d | %.1f %% | %.2f | %.1f %% | %.0f %% | %s | %.0f |\n",
            impl[k], mode[k], port[m], mg[k, m], (grants[k] > 0 ? mg[k, m] / grants[k] * 100 : 0),
            mc[k, m], (cpu[k] > 0 ? mc[k, m] / cpu[k] * 100 : 0), mc[k, m] / seconds * 100,
            fmt(u), (u > 0 ? 1e6 / u : 0)
        }
      }
    }
    if (("peer uncontended" in grants) || ("peer contended" in grants)) {
      print ""
      print "| library, mode | grants/s ÷ the peer (target ≥ 0.33) | Redis CPU µs/grant ÷ the peer | ceiling ÷ the peer |"
      print "|---|---|---|---|"
      split("uncontended contended", modes, " ")
      no = split("fairsem fairsem-batched baseline-batched", ours, " ")
      for (j = 1; j <= 2; j++) for (o = 1; o <= no; o++) {
        f = ours[o] " " modes[j]; p = "peer " modes[j]
        if (!(f in grants) || !(p in grants) || grants[p] == 0 || us[p] == 0) continue
        printf "| %s | %.2f | %.2f | %.2f |\n", f, grants[f] / grants[p], us[f] / us[p],
          top[f] / top[p]
      }
    }
  }' "$work/results.tsv"
