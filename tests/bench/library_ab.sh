#!/usr/bin/env bash
# Two versions of the semaphore's function library side by side: the Redis time of an
# uncontended pair (a fresh acquire, then its release) and of a contended grant (a fresh waiter
# queues behind the holder, whose release promotes it and pushes its wake-up into a Client's
# inbox), for library A (git revision REV, built into a temporary worktree) and library B (this
# tree's), both loaded at once into one private redis-server and sent alternately with
# `redis-cli --pipe`, so that only Redis's own time counts: INFO commandstats' FCALL usec divided
# by the count. Each round prints both and their ratio B / A; a round's two runs are back to back,
# so the ratio is the figure to read on a shared machine.
#
#   bash tests/bench/library_ab.sh d5654b0                  # 30,000 of each, 6 rounds
#   AB_COUNT=50000 AB_ROUNDS=3 bash tests/bench/library_ab.sh v0.3.1
#   AB_LUA_A=/tmp/old/build/generated/lua bash tests/bench/library_ab.sh   # a library built already
#   AB_LUA_B=DIR ...                                      # B built already, instead of this tree's
#   AB_SCRIPTS=1 bash tests/bench/library_ab.sh d5654b0   # the scripts with EVALSHA instead
#
# AB_SCRIPTS=1 sends each version's acquire and release scripts (SCRIPT LOAD, EVALSHA), as
# fairsem does where functions are missing (Redis 6.2), instead of its function library.
#
# AB_INTERLEAVE=CHUNK, for a busy machine: each round sends A's and B's calls in chunks of CHUNK
# pairs (or grants), A's first chunk, B's, then B's second, A's, and so on, each timed by
# commandstats on its own; a round prints the sums, and the median of the chunks' ratios B / A
# (chunks next to each other meet about the same load).
#   AB_INTERLEAVE=500 AB_ROUNDS=8 bash tests/bench/library_ab.sh 180f6f0
#
# Both libraries get the calls this tree's client sends (an acquire's FRESH argument, which
# earlier scripts ignore). Not part of CI: figures need a quiet machine.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
cd "$FAIRSEM_ROOT"
count=${AB_COUNT:-30000}
rounds=${AB_ROUNDS:-6}

work=$(mktemp -d /tmp/fairsem-library-ab.XXXXXX)
FAIRSEM_REDIS_PID= worktree=
cleanup() {
  [ -n "$FAIRSEM_REDIS_PID" ] && kill "$FAIRSEM_REDIS_PID"
  [ -n "$worktree" ] && git worktree remove --force "$worktree"
  rm -rf "$work"
}
trap cleanup EXIT

lua_a=${AB_LUA_A:-}
if [ -z "$lua_a" ]; then
  [ $# -eq 1 ] || { echo "usage: $0 REV (or AB_LUA_A=DIR $0)" >&2; exit 2; }
  worktree=$work/a
  git worktree add --quiet --detach "$worktree" "$1"
  fairsem_log "building library A ($1) in $worktree"
  cmake -S "$worktree" -B "$worktree/build" -DCMAKE_BUILD_TYPE=Release \
    -DFAIRSEM_BUILD_TESTS=OFF >/dev/null
  cmake --build "$worktree/build" -j "$(fairsem_jobs)" --target fairsem >/dev/null
  lua_a=$worktree/build/generated/lua
fi
lua_b=${AB_LUA_B:-}
if [ -z "$lua_b" ]; then
  fairsem_log "building library B (this tree, build/release)"
  cmake --preset release >/dev/null
  cmake --build build/release -j "$(fairsem_jobs)" --target fairsem >/dev/null
  lua_b=build/release/generated/lua
fi

fairsem_start_redis "$work"
rcli() { redis-cli -p "$FAIRSEM_REDIS_PORT" "$@"; }
scripts=${AB_SCRIPTS:-0}
if [ "$scripts" = 1 ]; then
  # Each version's two scripts, by SHA1: "ACQUIRE_SHA RELEASE_SHA".
  load() { rcli SCRIPT LOAD "$(cat "$1")"; }
  lib_a="$(load "$lua_a/semaphore_acquire.lua") $(load "$lua_a/semaphore_release.lua")"
  lib_b="$(load "$lua_b/semaphore_acquire.lua") $(load "$lua_b/semaphore_release.lua")"
  stat=evalsha
else
  lib_a=$(rcli FUNCTION LOAD "$(cat "$lua_a/semaphore_library.lua")")
  lib_b=$(rcli FUNCTION LOAD "$(cat "$lua_b/semaphore_library.lua")")
  stat=fcall
fi
[ "$lib_a" != "$lib_b" ] || { echo "A and B are the same code ($lib_a)" >&2; exit 2; }

# The commands, as RESP: per round and library, a file for each pattern (a fresh semaphore each).
interleave=${AB_INTERLEAVE:-0}
python3 - "$work" "$count" "$rounds" "$lib_a" "$lib_b" "$interleave" <<'PY'
import sys
work, count, rounds, lib_a, lib_b = sys.argv[1:6]
def call(lib, op):
    # A function library's function, or (AB_SCRIPTS=1) a script's SHA1: "ACQUIRE RELEASE".
    if " " in lib:
        return ["EVALSHA", lib.split()[0 if op == "acquire" else 1]]
    return ["FCALL", f"{lib}_semaphore_{op}"]
def resp(*args):
    out = [f"*{len(args)}\r\n"]
    for a in map(str, args):
        out.append(f"${len(a.encode())}\r\n{a}\r\n")
    return "".join(out)
for r in range(int(rounds)):
    for tag, lib in (("a", lib_a), ("b", lib_b)):
        # KEYS[7] is the prefix of the receipts' buckets (of one receipt key per release in
        # 0.3.1; a version between them took the same name for its one sorted set).
        def keys(name):
            return [f"ab:{{{name}}}:{k}" for k in
                    ("owner", "time", "counter", "meta", "info", "wake:", "receipts:", "slots", "free")]
        def acquire(k, limit, pid, mode, client):
            return resp(*call(lib, "acquire"), 9, *k, "acquire", limit, 3600000, pid, mode,
                        "host 1", 0, 1, client, 0, 0, 1)
        def release(k, limit, pid, ticket):
            return resp(*call(lib, "release"), 9, *k, "release", limit, 3600000, pid, ticket,
                        10000)
        # A counter set beforehand counts on from there (a new one starts at the server's
        # clock): tickets count from 1,001, as the releases below name them.
        def counter(k):
            return resp("SET", k[2], 1000)
        k = keys(f"pair-{tag}{r}")
        with open(f"{work}/pair-{tag}{r}.resp", "w") as f:
            f.write(counter(k))
            for i in range(int(count)):
                f.write(acquire(k, 2, f"p{i:08d}", "try", ""))
                f.write(release(k, 2, f"p{i:08d}", 1001 + i))
        k = keys(f"grant-{tag}{r}")
        with open(f"{work}/grant-{tag}{r}.setup", "w") as f:
            f.write(counter(k))
            f.write(acquire(k, 1, "h0", "try", ""))
        with open(f"{work}/grant-{tag}{r}.resp", "w") as f:
            holder, ticket = "h0", 1001
            for i in range(int(count)):
                waiter = f"w{i:08d}"
                f.write(acquire(k, 1, waiter, "queue", "ab-client"))
                f.write(release(k, 1, holder, ticket))
                holder, ticket = waiter, ticket + 1
# AB_INTERLEAVE: each pattern's files cut into chunks of CHUNK pairs or grants (two calls each).
chunk = int(sys.argv[6])
def calls(path):
    with open(path, newline="") as f:
        text = f.read()
    out, at = [], 0
    while at < len(text):
        n = int(text[at + 1:text.index("\r\n", at)])
        end = at
        for _ in range(n * 2 + 1):
            end = text.index("\r\n", end) + 2
        out.append(text[at:end])
        at = end
    return out
for r in range(int(rounds) if chunk else 0):
    for pattern in ("pair", "grant"):
        for tag in ("a", "b"):
            c = calls(f"{work}/{pattern}-{tag}{r}.resp")
            head = 1 if pattern == "pair" else 0  # the counter's SET
            for i, at in enumerate(range(head, len(c), 2 * chunk)):
                with open(f"{work}/{pattern}-{tag}{r}-{i:04d}.resp", "w") as f:
                    f.write("".join((c[:head] if i == 0 else []) + c[at:at + 2 * chunk]))
PY

# Runs FILE through --pipe; prints FCALL (or EVALSHA) usec per COUNT.
usec() {
  rcli CONFIG RESETSTAT >/dev/null
  local out
  out=$(rcli --pipe <"$1")
  grep -q 'errors: 0,' <<<"$out" || { echo "errors in $1: $out" >&2; exit 1; }
  rcli INFO commandstats | tr -d '\r' |
    awk -F'[:=,]' -v n="$count" -v stat="cmdstat_$stat:" \
      'index($0, stat) == 1 { printf "%.2f", $5 / n }'
}
# AB_INTERLEAVE: runs the chunks of PATTERN-a$r and PATTERN-b$r alternately (ab, ba, ab...);
# prints "A B median": each library's usec per COUNT, and the median chunk ratio B / A.
usec_chunks() {
  local pattern=$1 r=$2 i=0 first second ua ub out
  : >"$work/chunks"
  while [ -f "$work/$pattern-a$r-$(printf '%04d' $i).resp" ]; do
    first=a second=b
    [ $((i % 2)) = 0 ] || { first=b second=a; }
    for tag in $first $second; do
      rcli CONFIG RESETSTAT >/dev/null
      out=$(rcli --pipe <"$work/$pattern-$tag$r-$(printf '%04d' $i).resp")
      grep -q 'errors: 0,' <<<"$out" || { echo "errors in $pattern-$tag$r-$i: $out" >&2; exit 1; }
      printf -v "u$tag" '%s' "$(rcli INFO commandstats | tr -d '\r' |
        awk -F'[:=,]' 'index($0, "cmdstat_fcall:") == 1 { print $5 }')"
    done
    echo "$ua $ub" >>"$work/chunks"
    i=$((i + 1))
  done
  awk -v n="$count" '{ a += $1; b += $2 } END { printf "%.2f %.2f ", a / n, b / n }' "$work/chunks"
  awk '{ print $2 / $1 }' "$work/chunks" | sort -g |
    awk '{ r[NR] = $1 } END { printf "%.3f", NR % 2 ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2 }'
}
[ "$interleave" = 0 ] || [ "$scripts" = 0 ] ||
  { echo "AB_INTERLEAVE needs function libraries (not AB_SCRIPTS)" >&2; exit 2; }
fairsem_log "$count of each, $rounds rounds, redis-server $(redis-server --version | awk '{print $3}')"
printf '%-6s %12s %12s %8s %14s %14s %8s\n' round pair-A pair-B B/A grant-A grant-B B/A
for r in $(seq 0 $((rounds - 1))); do
  rcli --pipe <"$work/grant-a$r.setup" >/dev/null
  rcli --pipe <"$work/grant-b$r.setup" >/dev/null
  if [ "$interleave" != 0 ]; then
    read -r pa pb pm <<<"$(usec_chunks pair "$r")"
    read -r ga gb gm <<<"$(usec_chunks grant "$r")"
  else
    pa=$(usec "$work/pair-a$r.resp") pb=$(usec "$work/pair-b$r.resp")
    ga=$(usec "$work/grant-a$r.resp") gb=$(usec "$work/grant-b$r.resp")
  fi
  [ "$interleave" != 0 ] || {
    pm=$(awk -v a="$pa" -v b="$pb" 'BEGIN { printf "%.2f", b / a }')
    gm=$(awk -v a="$ga" -v b="$gb" 'BEGIN { printf "%.2f", b / a }')
  }
  printf '%-6s %12s %12s %8s %14s %14s %8s\n' $((r + 1)) "$pa" "$pb" "$pm" "$ga" "$gb" "$gm"
done
# Every pair released (nobody holds) and every grant happened: each waiter was promoted in turn,
# the last one holds.
for tag in a b; do
  held=$(rcli ZCARD "ab:{pair-${tag}$((rounds - 1))}:owner")
  [ "$held" = 0 ] || { echo "library $tag: $held still hold after the pairs" >&2; exit 1; }
done
for tag in a b; do
  last=$(rcli ZRANGE "ab:{grant-${tag}$((rounds - 1))}:owner" 0 -1)
  [ "$last" = "w$(printf '%08d' $((count - 1)))" ] ||
    { echo "library $tag: the contended run ended with $(wc -l <<<"$last") in owner" >&2; exit 1; }
done
if [ "$interleave" != 0 ]; then
  echo "(Redis µs per uncontended pair and per contended grant: INFO commandstats FCALL usec /"
  echo " count, summed over chunks of $interleave; B/A: the median of the chunks' ratios)"
else
  echo "(Redis µs per uncontended pair and per contended grant: INFO commandstats ${stat^^} usec / count)"
fi
