#!/usr/bin/env bash
# The README's main command: builds fairsem, starts a private redis-server (a Unix socket in a
# temp dir, no TCP port), runs the demo against it and stops the server again.
#
#   bash scripts/demo.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$FAIRSEM_ROOT"

fairsem_ensure_packages

dir="build/demo"
fairsem_log "building (release)"
cmake --preset release -B "$dir" -DFAIRSEM_BUILD_TESTS=OFF >/dev/null
cmake --build "$dir" -j "$(fairsem_jobs)" --target fairsem-probe fairsem-guard >/dev/null

tmp=$(mktemp -d /tmp/fairsem-demo-XXXXXX)
sock="$tmp/redis.sock"
redis-server --port 0 --unixsocket "$sock" --unixsocketperm 700 --dir "$tmp" \
  --save '' --appendonly no --logfile "$tmp/redis.log" &
redis_pid=$!
cleanup() { kill "$redis_pid" 2>/dev/null; wait "$redis_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

for _ in $(seq 1 200); do
  [ "$(redis-cli -s "$sock" ping 2>/dev/null)" = PONG ] && break
  kill -0 "$redis_pid" 2>/dev/null || { cat "$tmp/redis.log" >&2; exit 69; }
  sleep 0.05
done
fairsem_log "private redis-server running at unix:$sock"
"$dir/examples/fairsem-probe" --url "unix://$sock"
"$dir/examples/fairsem-guard" --url "unix://$sock"
