#!/usr/bin/env bash
# Runs clang-tidy 14 with the checked-in .clang-tidy over the library's sources (src/*.cpp, each
# of which includes its include/fairsem/impl/*-inl.hpp) and the example programs and the
# `fairsem` command (examples/, examples/cli/); the headers in include/fairsem, implementation
# included, are checked through its HeaderFilterRegex, the examples' own headers through the
# programs that include them. The library's units are checked as one translation unit (see
# fold_units below), the programs one by one. Fails on any finding (.clang-tidy makes every warning an error),
# and on a file that is not in the compile database (clang-tidy would skip it silently).
#
#   bash scripts/tidy.sh                       # every file in src/, examples/, examples/cli/
#                                              # but examples/asio_requests.cpp (see below)
#   bash scripts/tidy.sh src/semaphore.cpp     # only these
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$FAIRSEM_ROOT"

fairsem_ensure_packages clang-tidy-14

# fold_units DIR: the library's units among the files (src/*.cpp, each only an #include of its
# include/fairsem/impl/<unit>-inl.hpp) are checked as one translation unit, DIR/units.cpp, which
# includes each unit's -inl.hpp (as header-only mode compiles them), added to DIR's compile
# database with the flags of the units': the headers are parsed and checked once instead of once
# per unit (30 s instead of about 5 minutes of CPU). One check is off there, misc-no-recursion:
# seeing the whole library at once, it reports call cycles that exist by design and end after
# one turn (a connection found through Sentinel or a cluster opens direct connections to ask
# where to go; a redirection reloads the scripts on the node it was sent to).
fold_units() {
  local dir=$1 f units=() rest=() unit_patterns=()
  for f in "${files[@]}"; do
    if [[ "$f" == src/*.cpp ]]; then units+=("$f"); else rest+=("$f"); fi
  done
  [ "${#units[@]}" -gt 1 ] || return 0
  for f in "${units[@]}"; do
    echo "#include \"fairsem/impl/$(basename "$f" .cpp)-inl.hpp\""
  done >"$dir/units.cpp"
  python3 - "$dir" "$(realpath "${units[0]}")" <<'PY'
import json, os, sys
directory, model = sys.argv[1], sys.argv[2]
path = os.path.join(directory, "compile_commands.json")
db = [e for e in json.load(open(path)) if not e["file"].endswith("/units.cpp")]
entry = dict(next(e for e in db if e["file"] == model))
unity = os.path.realpath(os.path.join(directory, "units.cpp"))
entry["command"] = entry["command"].replace(model, unity)
entry["file"] = unity
entry.pop("output", None)
json.dump(db + [entry], open(path, "w"), indent=2)
PY
  clang-tidy-14 -p "$dir" --quiet --checks=-misc-no-recursion "$dir/units.cpp" \
    >"$dir/tidy-units.log" 2>&1 &
  units_pid=$!
  patterns=()
  for f in "${rest[@]}"; do patterns+=("^$(realpath "$f" | sed 's/[.[\*^$]/\\&/g')\$"); done
}

# tidy_pass DIR LABEL [CMAKE ARGS...]: configures DIR (compile_commands.json) and runs
# clang-tidy on "${files[@]}"; returns 1 on any finding.
tidy_pass() {
  local dir=$1 label=$2 log status findings patterns=() f
  shift 2
  fairsem_log "[tidy] configure $dir ($label)"
  # clang++-14 compiles what clang-tidy-14 parses, so no flag of another compiler confuses it.
  # FAIRSEM_INLINE=inline: the implementation (include/fairsem/impl/*-inl.hpp, which each
  # src/*.cpp includes) is read as header-only mode compiles it, so misc-definitions-in-headers
  # passes it and finds any definition there that lacks FAIRSEM_INLINE (a duplicate symbol
  # header-only). Nothing is built from this directory.
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++-14 \
    -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DFAIRSEM_BUILD_TESTS=OFF -DFAIRSEM_BUILD_EXAMPLES=ON \
    -DFAIRSEM_INSTALL=OFF "-DCMAKE_CXX_FLAGS=-DFAIRSEM_INLINE=inline" "$@" >/dev/null
  # run-clang-tidy takes regular expressions over the database's absolute paths.
  for f in "${files[@]}"; do
    if ! grep -qF "\"file\": \"$(realpath "$f")\"" "$dir/compile_commands.json"; then
      echo "tidy.sh: $f is not in $dir/compile_commands.json: nothing would check it" >&2
      return 1
    fi
    patterns+=("^$(realpath "$f" | sed 's/[.[\*^$]/\\&/g')\$")
  done
  fairsem_log "[tidy] clang-tidy-14 on ${#files[@]} file(s) ($label)"
  log="$dir/tidy.log"
  units_pid=""
  fold_units "$dir"
  set +e
  status=0
  : >"$log"
  if [ "${#patterns[@]}" -gt 0 ]; then
    # run-clang-tidy always asks for colour; the log is kept plain.
    run-clang-tidy-14 -p "$dir" -quiet -j "$(fairsem_jobs)" "${patterns[@]}" 2>&1 |
      sed 's/\x1b\[[0-9;]*m//g' >"$log"
    status=${PIPESTATUS[0]}
  fi
  if [ -n "$units_pid" ]; then
    wait "$units_pid" || status=1
    cat "$dir/tidy-units.log" >>"$log"
  fi
  set -e
  # Everything but run-clang-tidy's own progress lines: the findings, with their source lines.
  grep -v -E '^(clang-tidy-14 |Enabled checks:|[0-9]+ warnings? (and [0-9]+ errors? )?generated|Suppressed [0-9]+ warnings|Use -header-filter|Running clang-tidy)' "$log" || true
  # A finding in a header is reported for every source that includes it: count each once.
  findings=$({ grep -E '(warning|error): .*\[[a-z0-9.,-]+\]$' "$log" || true; } | sort -u | wc -l)
  echo
  if [ "$status" -ne 0 ] || [ "$findings" -gt 0 ]; then
    echo "clang-tidy: $findings finding(s) in ${#files[@]} file(s) ($label); see $log"
    return 1
  fi
  echo "clang-tidy: no findings in ${#files[@]} file(s) ($label)"
}

files=("$@")
if [ "${#files[@]}" -eq 0 ]; then
  # Not asio_requests.cpp: clang-tidy 14 cannot parse Asio's coroutines; g++ builds it in every CI job.
  mapfile -t files < <(find src examples examples/cli -maxdepth 1 -name '*.cpp' \
    ! -path examples/asio_requests.cpp | sort)
fi
# A header given on its own is in no compile command: clang-tidy would check it without the
# build's flags and find nothing. Name the src/<unit>.cpp that includes it instead.
for f in "${files[@]}"; do
  if [[ "$f" == *-inl.hpp ]]; then
    unit=$(basename "$f" -inl.hpp)
    echo "tidy.sh: $f is checked through src/$unit.cpp; pass that" >&2
    exit 2
  fi
done
# FAIRSEM_TIDY_BUILD_DIR: another build directory (default build/ci-tidy).
status=0
tidy_pass "${FAIRSEM_TIDY_BUILD_DIR:-build/ci-tidy}" "Debian's hiredis" || status=1
# The TLS code (include/fairsem/impl/tls-inl.hpp, compiled by src/tls.cpp) is compiled only
# against hiredis 1.x with hiredis_ssl: when the compat stage has built one, check it again with
# TLS on.
hiredis="build/compat/hiredis-${FAIRSEM_COMPAT_HIREDIS:-1.2.0}/prefix"
if [ -d "$hiredis/lib/cmake/hiredis" ] && [[ " ${files[*]} " == *" src/tls.cpp "* ]]; then
  files=(src/tls.cpp)
  tidy_pass "${FAIRSEM_TIDY_BUILD_DIR:-build/ci-tidy}-tls" "hiredis 1.x with TLS" \
    "-Dhiredis_DIR=$PWD/$hiredis/lib/cmake/hiredis" -DFAIRSEM_TLS=ON || status=1
fi
exit "$status"
