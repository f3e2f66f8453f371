# Shared by scripts/test.sh and scripts/demo.sh. Sourced, not run.

FAIRSEM_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Debian packages fairsem needs to build, test and demo. Installed with apt-get when missing.
FAIRSEM_PACKAGES=(g++ cmake ninja-build pkg-config libhiredis-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev redis-server redis-tools clang-format faketime
  libcli11-dev nlohmann-json3-dev dpkg-dev libasio-dev)

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
