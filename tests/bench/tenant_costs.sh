#!/usr/bin/env bash
# What a contended grant costs Redis with many tenants waiting (issue 52): this tree's function
# library on a private redis-server, three semaphores of limit 1, each with a holder and WAITERS
# waiters (1,000), driven through COUNT grant cycles with `redis-cli --pipe` (the holder
# releases, which promotes the next waiter and pushes its wake-up; a new waiter queues, so that
# WAITERS always wait):
#   tenants  every waiter of its own tenant (WAITERS tenants waiting; data model 3)
#   one      every waiter of one tenant (data model 3)
#   none     no tenant named (data model 2, as every semaphore before tenants)
# Only Redis's own time counts: INFO commandstats' FCALL usec divided by the cycles. The three
# run back to back in each round, so the ratios are the figures to read on a shared machine.
#
#   bash tests/bench/tenant_costs.sh                     # 20,000 cycles each, 1,000 waiters, 6 rounds
#   TC_COUNT=50000 TC_WAITERS=10000 TC_ROUNDS=3 bash tests/bench/tenant_costs.sh
#
# Not part of CI: figures need a quiet machine.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
cd "$FAIRSEM_ROOT"
count=${TC_COUNT:-20000}
waiters=${TC_WAITERS:-1000}
rounds=${TC_ROUNDS:-6}

work=$(mktemp -d /tmp/fairsem-tenant-costs.XXXXXX)
FAIRSEM_REDIS_PID=
cleanup() {
  [ -n "$FAIRSEM_REDIS_PID" ] && kill "$FAIRSEM_REDIS_PID"
  rm -rf "$work"
}
trap cleanup EXIT

fairsem_log "building the library (this tree, build/release)"
cmake --preset release >/dev/null
cmake --build build/release -j "$(fairsem_jobs)" --target fairsem >/dev/null
fairsem_start_redis "$work"
rcli() { redis-cli -p "$FAIRSEM_REDIS_PORT" "$@"; }
lib=$(rcli FUNCTION LOAD "$(cat build/release/generated/lua/semaphore_library.lua)")

# Per round and pattern: a setup file (counter, holder, waiters) and the cycles. A counter set
# beforehand counts on from there, so every ticket is known: a waiter's is the INCR of its
# acquire; in data model 3 a promoted waiter takes a new one (the INCR of its promotion). The
# grant order is arrival order in each pattern: in `tenants`, every tenant's virtual time is
# the same when it first queues, and one whose waiter was granted queues again one grant later.
python3 - "$work" "$count" "$waiters" "$rounds" "$lib" <<'PY'
import sys
work, count, waiters, rounds, lib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
def resp(*args):
    out = [f"*{len(args)}\r\n"]
    for a in map(str, args):
        out.append(f"${len(a.encode())}\r\n{a}\r\n")
    return "".join(out)
for r in range(rounds):
    for pattern in ("tenants", "one", "none"):
        name = f"{pattern}{r}"
        k = [f"tc:{{{name}}}:{x}" for x in
             ("owner", "time", "counter", "meta", "info", "wake:", "receipts:", "slots", "free")]
        fair = pattern != "none"
        def tenant_of(i):
            return {"tenants": f"t{i % waiters}", "one": "t", "none": None}[pattern]
        def acquire(pid, mode, tenant):
            extra = [tenant] if tenant is not None else []
            return resp("FCALL", f"{lib}_semaphore_acquire", 9, *k, "acquire", 1, 3600000, pid,
                        mode, "host 1", 0, 1, "tc-client", 0, 0, 1, *extra)
        def release(pid, ticket):
            return resp("FCALL", f"{lib}_semaphore_release", 9, *k, "release", 1, 3600000, pid,
                        ticket, 10000)
        counter = 1000
        queue = []  # (id, ticket) in grant order
        with open(f"{work}/{name}.setup", "w") as f:
            f.write(resp("SET", k[2], counter))
            counter += 1
            f.write(acquire("h0", "try", "t" if fair else None))
            holder = ("h0", counter)
            for i in range(waiters):
                counter += 1
                f.write(acquire(f"w{i:08d}", "queue", tenant_of(i)))
                queue.append((f"w{i:08d}", counter))
        with open(f"{work}/{name}.resp", "w") as f:
            for i in range(count):
                f.write(release(*holder))
                pid, ticket = queue.pop(0)
                if fair:
                    counter += 1
                    ticket = counter
                holder = (pid, ticket)
                n = waiters + i
                counter += 1
                f.write(acquire(f"w{n:08d}", "queue", tenant_of(n)))
                queue.append((f"w{n:08d}", counter))
        with open(f"{work}/{name}.expect", "w") as f:
            f.write(holder[0])
PY

# Runs FILE through --pipe; prints FCALL usec per COUNT, and in $work/calls the calls made from
# Lua per COUNT (every command commandstats counts but FCALL and CONFIG).
usec() {
  rcli CONFIG RESETSTAT >/dev/null
  local out
  out=$(rcli --pipe <"$1")
  grep -q 'errors: 0,' <<<"$out" || { echo "errors in $1: $out" >&2; exit 1; }
  rcli INFO commandstats | tr -d '\r' >"$work/stats"
  awk -F'[:=,]' -v n="$count" '/^cmdstat_/ && !/^cmdstat_(fcall|config|info)/ { c += $3 }
    END { printf "%.1f", c / n }' "$work/stats" >"$work/calls"
  awk -F'[:=,]' -v n="$count" 'index($0, "cmdstat_fcall:") == 1 { printf "%.2f", $5 / n }' \
    "$work/stats"
}
# The holder the cycles should end with, and WAITERS waiting (tenant by tenant in data model 3).
check() {
  [ "$(rcli HKEYS "tc:{$1}:slots")" = "$(cat "$work/$1.expect")" ] ||
    { echo "$1: the holder is $(rcli HKEYS "tc:{$1}:slots"), not $(cat "$work/$1.expect")" >&2; exit 1; }
  [ "$(rcli ZCARD "tc:{$1}:owner")" = $((waiters + 1)) ] ||
    { echo "$1: $(rcli ZCARD "tc:{$1}:owner") in owner" >&2; exit 1; }
}
fairsem_log "$count cycles each, $waiters waiting, $rounds rounds, redis-server $(redis-server --version | awk '{print $3}')"
printf '%-6s %10s %10s %10s %14s %14s %s\n' round tenants one none tenants/one tenants/none \
  'calls per cycle (tenants one none)'
for r in $(seq 0 $((rounds - 1))); do
  for p in tenants one none; do rcli --pipe <"$work/$p$r.setup" >/dev/null; done
  t=$(usec "$work/tenants$r.resp") ct=$(cat "$work/calls")
  o=$(usec "$work/one$r.resp") co=$(cat "$work/calls")
  n=$(usec "$work/none$r.resp") cn=$(cat "$work/calls")
  for p in tenants one none; do check "$p$r"; done
  printf '%-6s %10s %10s %10s %14s %14s %s\n' $((r + 1)) "$t" "$o" "$n" \
    "$(awk -v a="$o" -v b="$t" 'BEGIN { printf "%.2f", b / a }')" \
    "$(awk -v a="$n" -v b="$t" 'BEGIN { printf "%.2f", b / a }')" "$ct $co $cn"
  rcli FLUSHALL >/dev/null
done
echo "(Redis µs per contended grant cycle, a release that promotes and an acquire that queues:"
echo " INFO commandstats FCALL usec / cycles)"
