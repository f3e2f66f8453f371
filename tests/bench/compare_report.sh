# shellcheck shell=bash
# The write-up of tests/bench/compare.sh: the figures read from the JSON and records in $work,
# the plots ($IMG/wait_cdf.png, $IMG/queue_cost.png) and the markdown ($OUT); docs/img/ and
# docs/benchmark-run.md by default. Sourced by compare.sh once every program has run, not run on
# its own: it reads compare.sh's settings (CLIENTS, RUN_SECONDS, WEIGHTS, WEIGHTED_LIMIT,
# GRANT_TOLERANCE_US, OUT, IMG) and what its runs found (work, floor_us, ping_us, peer,
# peer_version).

# --- Figures.
counter() {  # file benchmark-name field
  jq -r --arg n "$2" --arg f "$3" '.benchmarks[] | select(.name == $n) | .[$f]' "$1"
}
num() { awk -v x="$1" 'BEGIN { printf "%.1f", x }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "n/a"; else printf "%.2f", a / b }'; }
check() { awk -v a="$1" -v b="$2" 'BEGIN { print (a <= b) ? "met" : "**missed**" }'; }
U="$work/fairsem_bench_uncontended.json"
pair_p50=$(counter "$U" BM_AcquireRelease/real_time p50_us)
try_p50=$(counter "$U" BM_TryAcquireRelease/real_time p50_us)
own_evalsha=$(counter "$U" BM_RawEvalsha/real_time p50_us)
pair_redis_us=$(counter "$U" BM_AcquireRelease/real_time redis_us)
pair_cmds=$(counter "$U" BM_AcquireRelease/real_time client_cmds)
pair_bound=$(awk -v f="$floor_us" 'BEGIN { printf "%.1f", 1.3 * 2 * f }')
peer_pair=n/a
peer_pair_redis_us=n/a
if [ "$peer" != none ]; then
  peer_pair=$(num "$(jq -r .p50_us "$work/peer-pair.json")")
  peer_pair_redis_us=$(num "$(cat "$work/peer-pair-redis-us.txt")")
fi

Q="$work/fairsem_bench_queue.json"
queue_row() {
  local n=$1 name="BM_QueueHotPath/$1/real_time"
  printf '| %s | %s | %s | %s | %s | %s |\n' "$n" \
    "$(num "$(counter "$Q" "$name" acquire_redis_us)")" "$(num "$(counter "$Q" "$name" release_redis_us)")" \
    "$(num "$(counter "$Q" "$name" acquire_p50_us)")" "$(num "$(counter "$Q" "$name" release_p50_us)")" \
    "$(num "$(counter "$Q" "$name" bytes_per_waiter)")"
}
q10a=$(counter "$Q" BM_QueueHotPath/10/real_time acquire_redis_us)
q10r=$(counter "$Q" BM_QueueHotPath/10/real_time release_redis_us)
qka=$(counter "$Q" BM_QueueHotPath/100000/real_time acquire_redis_us)
qkr=$(counter "$Q" BM_QueueHotPath/100000/real_time release_redis_us)
for n in 10 1000 100000; do
  printf '%s %s %s\n' "$n" "$(counter "$Q" "BM_QueueHotPath/$n/real_time" acquire_redis_us)" \
    "$(counter "$Q" "BM_QueueHotPath/$n/real_time" release_redis_us)"
done >"$work/queue.dat"

R="$work/fairsem_bench_renew.json"
renew_calls=$(counter "$R" BM_RenewRound/10000/real_time script_calls_per_round)
renew_us=$(counter "$R" BM_RenewRound/10000/real_time redis_us_per_round)
renew_ms=$(jq -r '.benchmarks[] | select(.name == "BM_RenewRound/10000/real_time") | .real_time' "$R")
renew_rss=$(counter "$R" BM_RenewRound/10000/real_time client_rss_MiB)
renew_per=$(counter "$R" BM_RenewRound/10000/real_time rss_bytes_per_permit)
renew_longest=$(counter "$R" BM_RenewRound/10000/real_time longest_call_us)

field() { jq -r "$2" "$work/$1.json"; }
contention_row() {  # label file
  local f=$2
  [ -f "$work/$f.json" ] || { printf '| %s | n/a |||||||||\n' "$1"; return; }
  printf '| %s | %s | %s | %s | %s / %s | %s / %s | %s | %s–%s | %s | %s |\n' "$1" \
    "$(num "$(field "$f" .grants_per_s)")" "$(field "$f" .fifo_violations)" \
    "$(num "$(field "$f" '.fifo_violation_share * 100')")%" \
    "$(num "$(field "$f" .wait_us.p50)")" "$(num "$(field "$f" .wait_us.max)")" \
    "$(num "$(field "$f" .handoff_us.p50)")" "$(num "$(field "$f" .handoff_us.p99)")" \
    "$(num "$(field "$f" .client_commands_per_grant)")" \
    "$(field "$f" .per_client_grants.min)" "$(field "$f" .per_client_grants.max)" \
    "$(num "$(field "$f" .redis_cpu_us_per_grant)")" "$(num "$(field "$f" .redis_commands_per_grant)")"
}

# One row per implementation and weight of the weighted scenario.
weighted_row() {  # label file units
  local f=$2 u=".by_units[\"$3\"]"
  [ -f "$work/$f.json" ] || { printf '| %s | %s | n/a ||||||||\n' "$1" "$3"; return; }
  local waiting
  waiting=$(field "$f" "$u.waiting_at_end")
  [ "$waiting" = 0 ] || waiting="$waiting (the oldest for $(num "$(field "$f" "$u.oldest_waiting_at_end_us")") µs)"
  printf '| %s | %s | %s | %s / %s / %s | %s | %s | %s | %s | %s | %s–%s |\n' "$1" "$3" \
    "$(field "$f" "$u.grants")" "$(num "$(field "$f" "$u.wait_us.p50")")" \
    "$(num "$(field "$f" "$u.wait_us.p99")")" "$(num "$(field "$f" "$u.wait_us.max")")" \
    "$waiting" \
    "$(num "$(field "$f" "$u.worst_wait_us")")" "$(num "$(field "$f" "$u.fair_share_us")")" \
    "$(ratio "$(field "$f" "$u.worst_wait_us")" "$(field "$f" "$u.fair_share_us")")" \
    "$(field "$f" "$u.overtaken")" \
    "$(field "$f" "$u.per_client_grants.min")" "$(field "$f" "$u.per_client_grants.max")"
}
na() { [ "$1" = -1 ] && echo n/a || echo "$1"; }  # -1: the figure needs tickets or slots
weighted_totals() {  # label file
  local f=$2
  [ -f "$work/$f.json" ] || { printf '| %s | n/a |||||||\n' "$1"; return; }
  printf '| %s | %s | %s | %s / %s | %s | %s | %s | %s / %s |\n' "$1" \
    "$(num "$(field "$f" .grants_per_s)")" "$(field "$f" .max_units_seen)" \
    "$(field "$f" .fifo_violations)" "$(field "$f" .fifo_violations_strict)" \
    "$(num "$(field "$f" '.fifo_violation_share * 100')")%" \
    "$(na "$(field "$f" .fifo_violations_queued_later)")" \
    "$(na "$(field "$f" .ticket_order_proven_violations)") / $(na "$(field "$f" .slot_handovers_early)")" \
    "$(num "$(field "$f" .fifo_violation_margin_us.p50)")" "$(num "$(field "$f" .fifo_violation_margin_us.max)")"
}

# --- Plots.
mkdir -p "$IMG"
{
  echo 'set terminal pngcairo size 900,520 font ",10"'
  echo "set output '$IMG/wait_cdf.png'"
  echo "set title 'Wait for a permit: limit 1, $CLIENTS clients, 1 ms hold (CDF)'"
  echo "set xlabel 'wait (ms, log scale)'; set ylabel 'share of grants'; set logscale x; set grid"
  echo "set key bottom right; set datafile separator ','"
  plots=()
  for f in fairsem-threads fairsem-processes peer-threads peer-processes; do
    [ -f "$work/$f.csv" ] || continue
    plots+=("'$work/$f.csv' using ((\$3-\$2)/1e6):(1.0) smooth cnormal lw 2 title '$f'")
  done
  (IFS=,; echo "plot ${plots[*]}")
} | gnuplot
gnuplot <<EOF
set terminal pngcairo size 900,520 font ",10"
set output '$IMG/queue_cost.png'
set title 'Redis time per call against queue length (limit 1, one holder, N waiters)'
set xlabel 'queued waiters (log scale)'; set ylabel 'Redis microseconds per call (SLOWLOG)'
set logscale x; set grid; set yrange [0:*]; set key top left
plot '$work/queue.dat' using 1:2 with linespoints lw 2 title 'acquire (queue at the tail)', \
     '' using 1:3 with linespoints lw 2 title 'release (promote and wake the head)'
EOF

# --- The write-up.
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')
fj() { field "$1" "$2"; }
peer_or() { [ "$peer" != none ] && fj "$1" "$2" || echo n/a; }
rps_f=$(fj fairsem-processes .grants_per_s); rps_p=$(peer_or peer-processes .grants_per_s)
rpt_f=$(fj fairsem-threads .grants_per_s); rpt_p=$(peer_or peer-threads .grants_per_s)
cpu_f=$(fj fairsem-processes .redis_cpu_us_per_grant); cpu_p=$(peer_or peer-processes .redis_cpu_us_per_grant)
ho50=$(fj fairsem-processes .handoff_us.p50); ho99=$(fj fairsem-processes .handoff_us.p99)
ho50t=$(fj fairsem-threads .handoff_us.p50); ho99t=$(fj fairsem-threads .handoff_us.p99)
w4=".by_units[\"4\"]"
w_fifo=$(fj fairsem-weighted .fifo_violations)
w_worst=$(fj fairsem-weighted "$w4.worst_wait_us"); w_fair=$(fj fairsem-weighted "$w4.fair_share_us")
w_bound=$(awk -v x="$w_fair" 'BEGIN { print 2 * x }')
w_peer=n/a
if [ "$peer" != none ]; then
  w_peer="peer: $(num "$(fj peer-weighted "$w4.worst_wait_us")") µs, $(ratio "$(fj peer-weighted "$w4.worst_wait_us")" "$(fj peer-weighted "$w4.fair_share_us")") × its fair share, $(fj peer-weighted "$w4.waiting_at_end") still waiting at the end"
fi
ge() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == "n/a") print "n/a (no peer)"; else print (a >= b) ? "met" : "**missed**" }'; }
vs_peer() { awk -v r="$1" -v b="$2" 'BEGIN { if (r == "n/a") print "n/a (no peer)"; else print (r <= b) ? "met" : "**missed**" }'; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == "n/a") print "n/a (no peer)"; else print (a < b) ? "met" : "**missed**" }'; }

cat >"$OUT" <<EOF
# fairsem benchmarks: the run compare.sh wrote

Written by \`bash tests/bench/compare.sh\` (SECONDS_PER_RUN=$RUN_SECONDS) on $(date -u +%Y-%m-%d).
Everything below was measured in that one run, against one private redis-server on loopback;
ratios compare figures from the same run. Machine: $(nproc) CPUs ($cpu), Linux $(uname -r),
$(redis-server --version | awk '{print $3}' | tr -d v=) ($(dpkg-query -W -f='${Version}' redis-server 2>/dev/null || echo ?)),
hiredis $(dpkg-query -W -f='${Version}' libhiredis-dev 2>/dev/null || echo ?), g++ $(g++ -dumpversion), Release build.
Peer: ${peer_version:-not installed (npm missing)}, with its defaults (10 ms retry interval, no
queue) except acquireTimeout, raised to 10 minutes so that no acquire times out.

Shared machines are noisy: rerun before quoting a figure, and compare ratios, not absolutes.

## Targets

| # | target | fairsem | bound / peer | result |
|---|---|---|---|---|
| 1 | uncontended acquire()+release() pair p50 ≤ 1.3 × (2 × raw EVALSHA p50) | $(num "$pair_p50") µs | $pair_bound µs (floor $floor_us µs) | $(check "$pair_p50" "$pair_bound") |
| 2 | grants/s, 8 processes, limit 1, 1 ms hold ≥ peer | $(num "$rps_f") | $( [ "$rps_p" = n/a ] && echo n/a || num "$rps_p") | $(ge "$rps_f" "$rps_p") |
| 2 | grants/s, 8 threads ≥ peer | $(num "$rpt_f") | $( [ "$rpt_p" = n/a ] && echo n/a || num "$rpt_p") | $(ge "$rpt_f" "$rpt_p") |
| 2 | grants out of FIFO order (processes / threads) | $(fj fairsem-processes .fifo_violations) / $(fj fairsem-threads .fifo_violations) | 0 | $( [ "$(fj fairsem-processes .fifo_violations)$(fj fairsem-threads .fifo_violations)" = 00 ] && echo met || echo '**missed**') |
| 2 | worst wait ≤ 2 × (clients − 1) × (hold + hand-off), processes | $(num "$(fj fairsem-processes .wait_us.max)") µs | $(num "$(fj fairsem-processes .worst_wait_bound_us)") µs | $( [ "$(fj fairsem-processes .worst_wait_within_bound)" = true ] && echo met || echo '**missed**') |
| 2 | worst wait, threads | $(num "$(fj fairsem-threads .wait_us.max)") µs | $(num "$(fj fairsem-threads .worst_wait_bound_us)") µs | $( [ "$(fj fairsem-threads .worst_wait_within_bound)" = true ] && echo met || echo '**missed**') |
| 2 | hand-off p50 ≤ 3 × raw round trip (processes / threads) | $(num "$ho50") / $(num "$ho50t") µs | $(awk -v f="$floor_us" 'BEGIN { printf "%.1f", 3 * f }') µs | $(check "$(awk -v a="$ho50" -v b="$ho50t" 'BEGIN{print (a>b)?a:b}')" "$(awk -v f="$floor_us" 'BEGIN { print 3 * f }')") |
| 2 | hand-off p99 ≤ 1 ms (processes / threads) | $(num "$ho99") / $(num "$ho99t") µs | 1000 µs | $(check "$(awk -v a="$ho99" -v b="$ho99t" 'BEGIN{print (a>b)?a:b}')" 1000) |
| 3 | client commands per grant ≤ 3 (processes) | $(num "$(fj fairsem-processes .client_commands_per_grant)") | 3 | $(check "$(fj fairsem-processes .client_commands_per_grant)" 3.01) |
| 3 | Redis CPU µs per grant < peer (processes) | $(num "$cpu_f") | $( [ "$cpu_p" = n/a ] && echo n/a || num "$cpu_p") | $(lt "$cpu_f" "$cpu_p") |
| 4 | Redis µs per acquire, 100,000 waiters ≤ 2 × 10 waiters | $(num "$qka") | $(num "$(awk -v x="$q10a" 'BEGIN{print 2*x}')") | $(check "$qka" "$(awk -v x="$q10a" 'BEGIN{print 2*x}')") |
| 4 | Redis µs per release, 100,000 waiters ≤ 2 × 10 waiters | $(num "$qkr") | $(num "$(awk -v x="$q10r" 'BEGIN{print 2*x}')") | $(check "$qkr" "$(awk -v x="$q10r" 'BEGIN{print 2*x}')") |
| 5 | longest single renew call (µs) with 10,000 permits renewed ≤ 1000 | $(num "$renew_longest") | 1000 | $(check "$renew_longest" 1000) |
| 6 | weighted (limit $WEIGHTED_LIMIT, $CLIENTS processes asking 1 or 4 units, 1 ms hold): grants out of FIFO order, past 1 ms | $w_fifo (queued later by Redis: $(fj fairsem-weighted .fifo_violations_queued_later); proven out of ticket order: $(fj fairsem-weighted .ticket_order_proven_violations)) | 0; peer: $(peer_or peer-weighted .fifo_violations) | $( [ "$w_fifo" = 0 ] && echo met || echo '**missed**') |
| 6 | weighted: worst wait of a 4-unit request ≤ 2 × its fair share | $(num "$w_worst") µs | $(num "$w_bound") µs; $w_peer | $(check "$w_worst" "$w_bound") |
| 7 | uncontended pair p50 ≤ 1.0 × the peer's | $(ratio "$pair_p50" "$peer_pair") × ($(num "$pair_p50") µs) | $peer_pair µs | $(vs_peer "$(ratio "$pair_p50" "$peer_pair")" 1.0) |
| 7 | Redis µs per uncontended pair ≤ 3 × the peer's | $(ratio "$pair_redis_us" "$peer_pair_redis_us") × ($(num "$pair_redis_us") µs) | $peer_pair_redis_us µs | $(vs_peer "$(ratio "$pair_redis_us" "$peer_pair_redis_us")" 3.0) |
| 7 | contended Redis CPU µs per grant ≤ 1.0 × the peer's (processes) | $(ratio "$cpu_f" "$cpu_p") × | | $(vs_peer "$(ratio "$cpu_f" "$cpu_p")" 1.0) |
| 7 | contended grants/s ≥ 1.25 × the peer's (processes) | $(ratio "$rps_f" "$rps_p") × | | $(awk -v r="$(ratio "$rps_f" "$rps_p")" 'BEGIN { if (r == "n/a") print "n/a (no peer)"; else print (r >= 1.25) ? "met" : "**missed**" }') |

"Raw round trip" in target 2 is the floor, redis-benchmark's EVALSHA p50. A hand-off runs
from the holder's release() call to the next holder's first instruction, across clients.

## 1. Uncontended pair

| | p50 µs | ratio to 2 × floor | Redis µs per pair (commandstats) | client commands |
|---|---|---|---|---|
| redis-benchmark EVALSHA \`return 1\` (floor) | $floor_us | | | 1 |
| redis-benchmark PING | $ping_us | | | 1 |
| fairsem's own client, EVALSHA \`return 1\` | $(num "$own_evalsha") | | | 1 |
| fairsem acquire() + release() | $(num "$pair_p50") | $(ratio "$pair_p50" "$(awk -v f="$floor_us" 'BEGIN{print 2*f}')") | $(num "$pair_redis_us") | $(num "$pair_cmds") |
| fairsem try_acquire() + release() | $(num "$try_p50") | $(ratio "$try_p50" "$(awk -v f="$floor_us" 'BEGIN{print 2*f}')") | | 2 |
| peer acquire() + release() | $peer_pair | $( [ "$peer_pair" = n/a ] && echo n/a || ratio "$peer_pair" "$(awk -v f="$floor_us" 'BEGIN{print 2*f}')") | $peer_pair_redis_us | 2 |

## 2 and 3. Contention: limit 1, $CLIENTS clients, 1 ms hold, $RUN_SECONDS s

| run | grants/s | out of FIFO order | share | wait p50 / max µs | hand-off p50 / p99 µs | client cmds per grant | grants per client | Redis CPU µs per grant | Redis cmds per grant (with script bodies') |
|---|---|---|---|---|---|---|---|---|---|
$(contention_row "fairsem, processes" fairsem-processes)
$(contention_row "fairsem, threads" fairsem-threads)
$(contention_row "peer, processes" peer-processes)
$(contention_row "peer, threads" peer-threads)

A grant is out of FIFO order when it went to a client that asked more than
$(fj fairsem-threads .fifo_tolerance_us) µs after another client that was still waiting. Every client
records its own ask, enter and release times on CLOCK_MONOTONIC; Redis CPU is used_cpu_sys +
used_cpu_user of redis-server over the run, divided by the grants; client commands are the
top-level commands in INFO commandstats (scripts, BRPOP, connection set-up).

![wait CDF](img/wait_cdf.png)

## 4. Queue length

| waiters | Redis µs per acquire | Redis µs per release | acquire p50 µs | release p50 µs | Redis bytes per queued waiter |
|---|---|---|---|---|---|
$(queue_row 10)
$(queue_row 1000)
$(queue_row 100000)

Each iteration queues a newcomer at the tail, then releases the holder, whose release promotes
and wakes the head of the queue: the queue keeps its length. Redis µs per call come from SLOWLOG
with a threshold of 0 (every call's execution time); bytes per waiter are used_memory after
queueing N waiters minus before, over N. The peer keeps no queue, so it has no column here.

![Redis time per call against queue length](img/queue_cost.png)

## 5. Renewal

| permits held by one process | script calls per round | longest call | Redis µs per round | round wall time | client RSS | RSS per permit |
|---|---|---|---|---|---|---|
| 10,000 | $(num "$renew_calls") | $(num "$renew_longest") µs | $(num "$renew_us") | $(num "$renew_ms") ms | $(num "$renew_rss") MiB | $(num "$renew_per") bytes |

A round is \`FairSemaphore::renew_all()\`, what the watchdog runs each interval: one script call
per 100 permits, so that no single call keeps Redis busy for long (the longest call is from
SLOWLOG).

## 6. Weighted permits: limit $WEIGHTED_LIMIT, $CLIENTS processes asking 1 or 4 units, 1 ms hold, $RUN_SECONDS s

Client i asks for W[i mod 2] units each time, W = $WEIGHTS: fairsem with \`acquire(n)\` in strict FIFO
order, the peer with \`MultiSemaphore(client, key, $WEIGHTED_LIMIT, n)\`, which polls every 10 ms and
takes the units whenever they happen to be free. Every acquire gives up when the run ends; a
request still waiting then is counted as such, and how long it had waited is a lower bound of
its wait.

| run | grants/s | most units held at once | out of FIFO order (past 1 ms / strict) | share | of those past 1 ms, queued later by Redis | proven out of ticket order / slot held twice | how far ahead p50 / max µs |
|---|---|---|---|---|---|---|---|
$(weighted_totals "fairsem" fairsem-weighted)
$(weighted_totals "peer" peer-weighted)

| run | units | grants | wait p50 / p99 / max µs | still waiting at the end | worst wait µs | fair share µs | worst / fair share | grants that went ahead of a waiting request of this weight | grants per client |
|---|---|---|---|---|---|---|---|---|---|
$(weighted_row "fairsem" fairsem-weighted 1)
$(weighted_row "fairsem" fairsem-weighted 4)
$(weighted_row "peer" peer-weighted 1)
$(weighted_row "peer" peer-weighted 4)

**Fair share.** Under strict FIFO a request waits for the requests queued before it, whatever
its own units; with one request out per client that is at most one request of each other client
(a client's next request queues behind it), the same for a 1-unit and a 4-unit request. So its
fair share is the time the run took, at its own grant rate, to make that many grants:
(clients − 1) / grants per second, the drain of the longest queue FIFO can put ahead of it. The
target allows the worst 4-unit wait twice that; a longer one was overtaken many times, or
starved. Not the mean wait of the weight itself: a weight that waits too long every time would
pass against its own mean. The worst wait of a weight includes its requests still waiting at the
end (how long they had waited by then).

**FIFO order**, strict and units-aware: a grant is out of order when a request that asked more
than $(fj fairsem-weighted .fifo_tolerance_us) µs before it was still waiting, whatever the units of either (a later 1-unit request
that would fit in the free units may not go ahead of an earlier 4-unit one). "Past 1 ms" counts
only grants that the earlier request still waited more than $GRANT_TOLERANCE_US µs after: with a limit above 1, one
release can promote several waiters, and they start in whatever order they wake up; "strict"
counts every one, and "how far ahead" is how long the earlier request still waited after such a
grant.

The clients' clocks can misorder two requests on the ask side too: a process can lose more than
100 µs between reading the clock and its acquire reaching Redis. fairsem's tickets (fencing
tokens) are drawn by Redis in the order requests join the queue, so "queued later by Redis"
counts the out-of-order grants where every request the grant went ahead of had drawn a later
ticket. Its slots give two checks with no tolerance at all: a permit cannot have been granted
before every one of its slots was given back by the release() call of its previous holder, so a
higher ticket that started before then proves a grant out of ticket order, and a holder that
started before its slot's previous holder called release() proves a slot held twice. The peer
has neither tickets nor slots (n/a).

## Commands

\`\`\`
redis-benchmark -p PORT -c 1 -P 1 -n 100000 --csv evalsha <sha of "return 1"> 0
FAIRSEM_BENCH_URL=redis://127.0.0.1:PORT build/bench/tests/bench/fairsem_bench_uncontended --benchmark_min_time=3
FAIRSEM_BENCH_URL=... build/bench/tests/bench/fairsem_bench_queue --benchmark_min_time=3
FAIRSEM_BENCH_URL=... build/bench/tests/bench/fairsem_bench_renew --benchmark_min_time=2
FAIRSEM_BENCH_URL=... build/bench/tests/bench/fairsem_contention --clients $CLIENTS --limit 1 --hold-ms 1 --seconds $RUN_SECONDS --mode processes|threads
node tests/bench/peer/peer.mjs pair --port PORT --iterations 20000
fairsem_contention --impl redis-semaphore --external "node tests/bench/peer/peer.mjs contention --port PORT --clients $CLIENTS --limit 1 --hold-ms 1 --seconds $RUN_SECONDS --mode processes|threads --out FILE" --records FILE ...
FAIRSEM_BENCH_URL=... build/bench/tests/bench/fairsem_contention --name weighted --clients $CLIENTS --limit $WEIGHTED_LIMIT --weights $WEIGHTS --hold-ms 1 --seconds $RUN_SECONDS --mode processes --fifo-grant-tolerance-us $GRANT_TOLERANCE_US
fairsem_contention --impl redis-semaphore --clients $CLIENTS --limit $WEIGHTED_LIMIT --weights $WEIGHTS --hold-ms 1 --seconds $RUN_SECONDS --mode processes --fifo-grant-tolerance-us $GRANT_TOLERANCE_US --records FILE --external "node tests/bench/peer/peer.mjs contention --port PORT --key bench-weighted --clients $CLIENTS --limit $WEIGHTED_LIMIT --weights $WEIGHTS --hold-ms 1 --seconds $RUN_SECONDS --mode processes --out FILE"
\`\`\`
EOF
fairsem_log "wrote $OUT, $IMG/wait_cdf.png, $IMG/queue_cost.png"
grep -E '^\| [0-9] \|' "$OUT"
