#!/usr/bin/env bash
# What a big receipts set costs Redis when it expires: with an idle expiry, a busy semaphore
# that goes idle keeps about (release rate x receipt lifetime) receipts in one sorted set, which
# expires once its newest receipt may go (docs/keys-and-scripts.md). On a private redis-server
# this fills such a set (members ID:TICKET as a release writes them), lets it expire, and reads
# the server's stall from LATENCY (the expire-del event), with lazyfree-lazy-expire off (the
# default of Redis 7.0 and 7.2) and on (Valkey 8's default).
#
#   bash tests/bench/receipts_expiry.sh              # 1,400,000 receipts
#   RECEIPTS=200000 bash tests/bench/receipts_expiry.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
cd "$FAIRSEM_ROOT"
count=${RECEIPTS:-1400000}
work=$(mktemp -d /tmp/fairsem-receipts-expiry.XXXXXX)
FAIRSEM_REDIS_PID=
trap '[ -n "$FAIRSEM_REDIS_PID" ] && kill "$FAIRSEM_REDIS_PID"; rm -rf "$work"' EXIT
fairsem_start_redis "$work"
rcli() { redis-cli -p "$FAIRSEM_REDIS_PORT" "$@"; }
key='fairsem:{busy}:receipts'
fill='local from, n = tonumber(ARGV[1]), tonumber(ARGV[2])
for j = from, from + n - 1 do
  redis.call("ZADD", KEYS[1], 1800000000000 + j,
             "c0ffee1234567890abcdef12:" .. string.format("%d", 1795000000000000 + j))
end
return redis.call("ZCARD", KEYS[1])'
rcli CONFIG SET latency-monitor-threshold 1 >/dev/null
fairsem_log "redis-server $(redis-server --version | awk '{print $3}'), $count receipts"
for lazy in no yes; do
  for ((from = 0; from < count; from += 100000)); do
    n=$((count - from < 100000 ? count - from : 100000))
    rcli EVAL "$fill" 1 "$key" "$from" "$n" >/dev/null
  done
  memory=$(rcli INFO memory | awk -F: '/^used_memory_human/ {print $2}' | tr -d '\r')
  rcli CONFIG SET lazyfree-lazy-expire "$lazy" >/dev/null
  rcli LATENCY RESET >/dev/null
  rcli PEXPIRE "$key" 100 >/dev/null
  while [ "$(rcli EXISTS "$key")" != 0 ]; do sleep 0.05; done
  sleep 0.2  # the expire cycle that deleted it has reported by now
  stall=$(rcli LATENCY HISTORY expire-del | awk 'NR % 2 == 0 && $1 > max {max = $1} END {print max + 0}')
  printf 'lazyfree-lazy-expire %-3s  %d receipts (%s): the expiry stalled Redis %s ms\n' \
    "$lazy" "$count" "$memory" "$stall"
done
