#!/usr/bin/env bash
# What a receipts bucket costs Redis when it expires. A release's receipt goes to the bucket of
# the receipts that may go in the same 4,096 ms, a hash that expires as a whole
# (docs/keys-and-scripts.md), so a semaphore releasing RATE permits a second frees about
# RATE x 4.096 receipts at a time. On a private redis-server this fills such a bucket (fields
# ID:TICKET as a release writes them), lets it expire, and reads the server's stall from LATENCY
# (the expire-del event), with lazyfree-lazy-expire off (the default of Redis 7.0 and 7.2) and
# on (Valkey 8's default).
#
#   bash tests/bench/receipts_expiry.sh              # 20,000 releases/s: 81,920 receipts
#   RATE=5000 bash tests/bench/receipts_expiry.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
cd "$FAIRSEM_ROOT"
rate=${RATE:-20000}
count=$((rate * 4096 / 1000))
fairsem_private_redis receipts-expiry
work=$FAIRSEM_WORK
key='fairsem:{busy}:receipts:439453125'
fill='local from, n = tonumber(ARGV[1]), tonumber(ARGV[2])
for j = from, from + n - 1 do
  redis.call("HSET", KEYS[1], "c0ffee1234567890abcdef12:" .. string.format("%d", 1795000000000000 + j), "1")
end
return redis.call("HLEN", KEYS[1])'
rcli CONFIG SET latency-monitor-threshold 1 >/dev/null
fairsem_log "redis-server $(redis-server --version | awk '{print $3}'), $rate releases/s: $count receipts in a bucket"
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
