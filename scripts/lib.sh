# Shared by scripts/test.sh, scripts/demo.sh and the benchmark scripts in tests/bench. Sourced,
# not run.

FAIRSEM_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Debian packages fairsem needs to build, test and demo. Installed with apt-get when missing.
FAIRSEM_PACKAGES=(g++ cmake ninja-build pkg-config libhiredis-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev redis-server redis-tools clang-format faketime
  libcli11-dev nlohmann-json3-dev dpkg-dev libasio-dev python3 librapidcheck-dev)

fairsem_log() { printf '\033[1m==> %s %s\033[0m\n' "$(date +%T)" "$*" >&2; }

fairsem_ensure_packages() {
  local missing=() pkg
  for pkg in "${FAIRSEM_PACKAGES[@]}" "$@"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
      missing+=("$pkg")
    fi
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  fairsem_log "installing Debian packages: ${missing[*]}"
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "need root (or sudo) to install: ${missing[*]}" >&2; return 1; }
    sudo=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

fairsem_jobs() { nproc 2>/dev/null || echo 2; }

# fairsem_bench_binary BUILD NAME: prints the path of the benchmark NAME in BUILD (a bench preset
# build), or says how to build it and fails (status 2) when it is missing.
fairsem_bench_binary() {
  local bench="$1/tests/bench/$2"
  if [ ! -x "$bench" ]; then
    echo "$bench is missing: cmake --preset bench && cmake --build build/bench" >&2
    return 2
  fi
  echo "$bench"
}

# fairsem_start_redis DIR: starts a private redis-server (no persistence) on a random free
# loopback port, its log and files in DIR; sets FAIRSEM_REDIS_PORT and FAIRSEM_REDIS_PID. Tries
# another port when redis-server could not bind one (it exits then). The caller stops it.
fairsem_start_redis() {
  local dir=$1 port pid
  for _ in $(seq 20); do
    port=$(shuf -i 20000-60000 -n 1)
    redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --dir "$dir" \
      --logfile "$dir/redis.log" &
    pid=$!
    for _ in $(seq 100); do
      redis-cli -p "$port" ping >/dev/null 2>&1 && break
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    # Ours answers (not another server that already had the port: ours would have exited).
    if kill -0 "$pid" 2>/dev/null && redis-cli -p "$port" ping >/dev/null 2>&1; then
      FAIRSEM_REDIS_PORT=$port FAIRSEM_REDIS_PID=$pid
      return 0
    fi
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
  done
  echo "could not start redis-server (see $dir/redis.log)" >&2
  return 1
}

# fairsem_private_redis NAME: for a benchmark script, a private redis-server (fairsem_start_redis)
# in a new directory /tmp/fairsem-NAME.XXXXXX, FAIRSEM_WORK, where the script may keep its files
# too; both go when the script exits (its EXIT trap). rcli talks to that server.
fairsem_private_redis() {
  FAIRSEM_WORK=$(mktemp -d "/tmp/fairsem-$1.XXXXXX")
  FAIRSEM_REDIS_PID=
  trap fairsem_stop_private_redis EXIT
  fairsem_start_redis "$FAIRSEM_WORK"
}
fairsem_stop_private_redis() {
  if [ -n "$FAIRSEM_REDIS_PID" ]; then
    kill "$FAIRSEM_REDIS_PID" 2>/dev/null || true
    # Until it has exited: it may still write in FAIRSEM_WORK while it shuts down.
    wait "$FAIRSEM_REDIS_PID" 2>/dev/null || true
  fi
  rm -rf "$FAIRSEM_WORK"
}
rcli() { redis-cli -p "$FAIRSEM_REDIS_PORT" "$@"; }
