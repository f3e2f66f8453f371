#!/usr/bin/env bash
# Redis time of an uncontended acquire+release pair, five ways, alternated on one private
# redis-server: the library's scripts with EVALSHA (as the build composes them), the same code
# as the library's function library with FCALL (what fairsem sends to Redis 7 and Valkey:
# <build>/generated/lua/semaphore_library.lua, whose helpers are built once per FUNCTION LOAD
# instead of once per run), the same Redis calls as that pair with no other code
# (fold_probe/calls_only.lua, FCALL: what the calls cost on their own), the folded prototype in
# fold_probe/ (what the uncontended path would cost over a folded data model, with inline
# code), and a plain lease semaphore (fold_probe/plain.lua + ZREM, the peer's algorithm).
# Each pair is sent with `redis-cli --pipe`, so only Redis's own time counts: INFO
# commandstats' usec for EVALSHA (and ZREM) divided by the pairs. Then what a script pays before
# its first call: an empty script against the shared parts (src/lua/semaphore/common.lua,
# slots.lua, queue.lua) with nothing after their definitions, each run by redis-benchmark with the
# semaphore's 9 keys and an acquire's arguments.
#
#   bash tests/bench/fold_probe.sh                 # builds build/bench's library first
#   FOLD_PROBE_LUA_DIR=<build>/generated/lua FOLD_PROBE_PAIRS=50000 FOLD_PROBE_ROUNDS=3 \
#     bash tests/bench/fold_probe.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
cd "$FAIRSEM_ROOT"
pairs=${FOLD_PROBE_PAIRS:-50000}
rounds=${FOLD_PROBE_ROUNDS:-3}
lua=${FOLD_PROBE_LUA_DIR:-}
if [ -z "$lua" ]; then
  fairsem_log "building the library's scripts (build/bench)"
  cmake --preset bench >/dev/null
  cmake --build build/bench -j "$(fairsem_jobs)" --target fairsem >/dev/null
  lua=build/bench/generated/lua
fi
probe=tests/bench/fold_probe

fairsem_private_redis fold-probe
work=$FAIRSEM_WORK
load() { rcli SCRIPT LOAD "$(cat "$1")"; }
library=$(rcli FUNCTION LOAD "$(cat "$lua/semaphore_library.lua")")
calls_only=$(rcli FUNCTION LOAD "$(cat $probe/calls_only.lua)")

# The commands of every pair, as RESP, one file per way.
python3 - "$work" "$pairs" "$library" "$calls_only" "$(load "$lua/semaphore_acquire.lua")" \
  "$(load "$lua/semaphore_release.lua")" "$(load $probe/acquire.lua)" \
  "$(load $probe/release.lua)" "$(load $probe/plain.lua)" <<'PY'
import sys, time
work, pairs, library, calls_only, acquire, release, folded_acquire, folded_release, plain = \
    sys.argv[1:]
def resp(*args):
    out = [f"*{len(args)}\r\n"]
    for a in map(str, args):
        out.append(f"${len(a.encode())}\r\n{a}\r\n")
    return "".join(out)
keys = [f"P:{{probe}}:{k}" for k in
        ("owner", "time", "counter", "meta", "info", "wake:", "released:", "slots", "free")]
now = int(time.time() * 1000)
with open(f"{work}/library.resp", "w") as lib, open(f"{work}/folded.resp", "w") as fold, \
     open(f"{work}/plain.resp", "w") as peer, open(f"{work}/functions.resp", "w") as fcall, \
     open(f"{work}/calls.resp", "w") as calls:
    # The library's ways and the calls alone start from an opened semaphore, as a Client's do.
    for f in (lib, fcall, calls):
        f.write(resp("HSET", keys[3], "limit", 2, "slots", 0))
    for i in range(int(pairs)):
        pid = f"id{i:08d}"
        # As the library sends a first call: a random id, FRESH 1.
        lib.write(resp("EVALSHA", acquire, 9, *keys, "acquire", 2, 10000, pid, "try", "host 1",
                       0, 1, "", 0, 0, 1))
        lib.write(resp("EVALSHA", release, 9, *keys, "release", 2, 10000, pid, i + 1, 10000))
        fcall.write(resp("FCALL", f"{library}_semaphore_acquire", 9, *keys, "acquire", 2, 10000, pid,
                         "try", "host 1", 0, 1, "", 0, 0, 1))
        fcall.write(resp("FCALL", f"{library}_semaphore_release", 9, *keys, "release", 2, 10000, pid,
                         i + 1, 10000))
        calls.write(resp("FCALL", f"{calls_only}_acquire", 9, *keys, "acquire", 2, 10000, pid,
                         "try", "host 1", 0, 1, "", 0, 0, 1))
        calls.write(resp("FCALL", f"{calls_only}_release", 9, *keys, "release", 2, 10000, pid,
                         i + 1, 10000))
        fold.write(resp("EVALSHA", folded_acquire, 9, *keys, "acquire", 2, 10000, pid, "try",
                        "host 1", 1))
        fold.write(resp("EVALSHA", folded_release, 9, *keys, "release", 2, 10000, pid, 0, 10000))
        peer.write(resp("EVALSHA", plain, 1, "P:{probe}:plain", 2, pid, 10000, now + i))
        peer.write(resp("ZREM", "P:{probe}:plain", pid))
PY

usec_per_pair() {
  rcli INFO commandstats | tr -d '\r' |
    awk -F'[:=,]' -v n="$pairs" '/^cmdstat_(evalsha|fcall|zrem):/ { u += $5 } END { printf "%.2f", u / n }'
}
fairsem_log "$pairs pairs each way, $rounds rounds, redis-server $(redis-server --version | awk '{print $3}')"
printf '%-6s %10s %10s %10s %10s %10s %16s %16s %16s %16s\n' round library functions calls folded \
  plain library/plain functions/plain calls/plain folded/plain
for round in $(seq "$rounds"); do
  declare -A us=()
  for way in library functions calls folded plain; do
    rcli FLUSHALL >/dev/null
    rcli CONFIG RESETSTAT >/dev/null
    rcli --pipe <"$work/$way.resp" >/dev/null
    us[$way]=$(usec_per_pair)
    # Every pair was a grant and a release: the tickets handed out, and nobody left holding.
    case $way in
      library | functions | calls) granted=$(rcli GET 'P:{probe}:counter') ;;
      folded) granted=$(rcli HGET 'P:{probe}:meta' counter) ;;
      plain) granted=$pairs ;;
    esac
    left=$(rcli EXISTS 'P:{probe}:owner' 'P:{probe}:plain')
    if [ "$granted" != "$pairs" ] || [ "$left" != 0 ]; then
      echo "$way: $granted of $pairs pairs granted, $left holder sets left" >&2
      exit 1
    fi
  done
  awk -v r="$round" -v l="${us[library]}" -v u="${us[functions]}" -v c="${us[calls]}" \
    -v f="${us[folded]}" -v p="${us[plain]}" 'BEGIN {
      printf "%-6s %10.2f %10.2f %10.2f %10.2f %10.2f %15.2fx %15.2fx %15.2fx %15.2fx\n",
        r, l, u, c, f, p, l / p, u / p, c / p, f / p }'
done
echo "(Redis µs per acquire+release pair: INFO commandstats, EVALSHA, FCALL and ZREM)"

# The shared parts' definitions alone: every run of every script builds their functions again.
parts=src/lua/semaphore
cat $parts/common.lua $parts/slots.lua $parts/queue.lua >"$work/shared_only.lua"
echo "return 0" >>"$work/shared_only.lua"
usec_per_call() {
  rcli CONFIG RESETSTAT >/dev/null
  redis-benchmark -p "$FAIRSEM_REDIS_PORT" -c 1 -n 100000 -q EVALSHA "$1" 9 o t c m i w r s f \
    acquire 2 10000 id try info >/dev/null
  rcli INFO commandstats | tr -d '\r' | awk -F'[:=,]' '/^cmdstat_evalsha:/ { print $7 }'
}
empty=$(rcli SCRIPT LOAD "return 0")
shared=$(load "$work/shared_only.lua")
printf '%-6s %12s %20s\n' round empty shared-parts-only
for round in $(seq "$rounds"); do
  printf '%-6s %12s %20s\n' "$round" "$(usec_per_call "$empty")" "$(usec_per_call "$shared")"
done
echo "(Redis µs per EVALSHA: INFO commandstats usec_per_call)"
