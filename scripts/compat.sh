# The compat stage's dependencies: hiredis 1.2.0 and the Redis/Valkey servers fairsem supports
# besides Debian's, built from the source tarballs in the compat directory for the tests only
# (nothing of them is installed, vendored or shipped). Sourced by scripts/test.sh, not run.
#
# The compat directory is the first of: $FAIRSEM_COMPAT_DIR, ../shared/compat beside the
# checkout, /work/shared/compat (where this project's workplace keeps it). It holds
# hiredis-1.2.0.tar.gz, valkey-8.0.1.tar.gz, redis-6.2.16.tar.gz and redis-7.2.6.tar.gz.
# Each is built once under build/compat/ and rebuilt only when its tarball changes.

# "name version" of each server the compat stage runs the tests against, in order. The name is
# the tarball's stem and what INFO server reports (server_name, or "redis" when it has none).
FAIRSEM_COMPAT_SERVERS=("valkey 8.0.1" "redis 6.2.16" "redis 7.2.6")
FAIRSEM_COMPAT_HIREDIS="1.2.0"
# How they are built: part of each build's stamp, so that changing it rebuilds a cached build.
FAIRSEM_COMPAT_RECIPE="tls malloc=libc"

# Prints the compat directory, or nothing when there is none.
fairsem_compat_dir() {
  local dir
  for dir in "${FAIRSEM_COMPAT_DIR:-}" "$FAIRSEM_ROOT/../shared/compat" /work/shared/compat; do
    if [ -n "$dir" ] && [ -f "$dir/hiredis-$FAIRSEM_COMPAT_HIREDIS.tar.gz" ]; then
      (cd "$dir" && pwd)
      return 0
    fi
  done
}

# _fairsem_compat_unpack TARBALL DEST: unpacks TARBALL into DEST (its top directory stripped)
# unless DEST already holds a build of exactly this tarball and recipe. Returns 1 when DEST is current.
_fairsem_compat_unpack() {
  local tarball=$1 dest=$2 sum
  sum="$(sha256sum "$tarball" | cut -d' ' -f1) $FAIRSEM_COMPAT_RECIPE"
  if [ -f "$dest/.fairsem-built" ] && [ "$(cat "$dest/.fairsem-built")" = "$sum" ]; then
    return 1
  fi
  rm -rf "$dest"
  mkdir -p "$dest/src"
  tar -xzf "$tarball" -C "$dest/src" --strip-components=1
  echo "$sum" >"$dest/.fairsem-sum"
}

_fairsem_compat_done() { mv "$1/.fairsem-sum" "$1/.fairsem-built"; }

# fairsem_compat_build COMPAT_DIR: builds everything; prints nothing but progress on stderr.
#   build/compat/hiredis-1.2.0/prefix            hiredis and hiredis_ssl, with CMake config
#   build/compat/<name>-<version>/bin/           redis-server and redis-cli with TLS (for Valkey, links
#                                                to valkey-server and valkey-cli)
fairsem_compat_build() {
  local compat=$1 root="$FAIRSEM_ROOT/build/compat" dest server name version bin
  dest="$root/hiredis-$FAIRSEM_COMPAT_HIREDIS"
  if _fairsem_compat_unpack "$compat/hiredis-$FAIRSEM_COMPAT_HIREDIS.tar.gz" "$dest"; then
    fairsem_log "[compat] building hiredis $FAIRSEM_COMPAT_HIREDIS (with hiredis_ssl)"
    cmake -S "$dest/src" -B "$dest/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DENABLE_SSL=ON -DDISABLE_TESTS=ON -DCMAKE_INSTALL_PREFIX="$dest/prefix" >/dev/null
    cmake --build "$dest/build" -j "$(fairsem_jobs)" >/dev/null
    cmake --install "$dest/build" >/dev/null
    _fairsem_compat_done "$dest"
  fi
  for server in "${FAIRSEM_COMPAT_SERVERS[@]}"; do
    read -r name version <<<"$server"
    dest="$root/$name-$version"
    if _fairsem_compat_unpack "$compat/$name-$version.tar.gz" "$dest"; then
      fairsem_log "[compat] building $name-server $version"
      # Only the server and the CLI (cluster creation), with libc's malloc: no jemalloc build.
      # With TLS built in (Debian's libssl-dev): the TLS tests start TLS-only servers on each
      # server fairsem supports, as they do on Debian's.
      # One make in src/: the top Makefile starts a sub-make per goal, and under -j each of them
      # runs `make distclean` in deps/ while the other builds there (Redis 6.2 then links without
      # its liblua.a).
      make -C "$dest/src/src" -j "$(fairsem_jobs)" MALLOC=libc BUILD_TLS=yes \
        "$name-server" "$name-cli" >"$dest/build.log" 2>&1 ||
        { tail -n 30 "$dest/build.log" >&2; return 1; }
      bin="$dest/bin"
      mkdir -p "$bin"
      # The test harness runs redis-server and redis-cli from PATH.
      ln -sf "$dest/src/src/$name-server" "$bin/redis-server"
      ln -sf "$dest/src/src/$name-cli" "$bin/redis-cli"
      _fairsem_compat_done "$dest"
    fi
  done
}
