#!/usr/bin/env bash
# Runs clang-tidy 14 with the checked-in .clang-tidy over the library's sources (src/*.cpp, one
# per folder of include/fairsem/impl/, each including that folder's units.hpp), the `fairsem`
# command (tools/fairsem/), the command-line code it shares with the example programs
# (tools/args/) and the examples (examples/); the headers in include/fairsem, implementation
# included, are checked through its HeaderFilterRegex, the programs' own headers through the
# programs that include them. The library's units are checked as one translation unit, the
# `fairsem` command's files as another (see fold_units below), the other programs one by one.
# Fails on any finding (.clang-tidy makes every warning an error), and on a file that is not in
# the compile database (clang-tidy would skip it silently).
#
#   bash scripts/tidy.sh                       # every file in src/, src/prometheus/,
#                                              # tools/fairsem/, tools/args/, examples/
#                                              # but examples/asio_requests.cpp (see below)
#   bash scripts/tidy.sh src/semaphore.cpp     # only these
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$FAIRSEM_ROOT"

fairsem_ensure_packages clang-tidy-14

# fold DIR NAME INCLUDE CHECKS FILTER FILE...: checks FILE... as one translation unit,
# DIR/NAME.cpp, which includes each file's INCLUDE (a command printing the line for "$f"), with
# the compile database's flags of the first, in the background (its pid and log are added to
# fold_pids and fold_logs). The headers they share are parsed and checked once instead of once
# per file. CHECKS: more --checks; FILTER: the header filter, when the folded files are not
# headers.
fold() {
  local dir=$1 name=$2 include=$3 checks=$4 filter=$5 f
  shift 5
  for f in "$@"; do eval "$include"; done >"$dir/$name.cpp"
  python3 - "$dir" "$(realpath "$1")" "$name.cpp" <<'PY'
import json, os, sys
directory, model, name = sys.argv[1:4]
path = os.path.join(directory, "compile_commands.json")
unity = os.path.realpath(os.path.join(directory, name))
db = [e for e in json.load(open(path)) if e["file"] != unity]
entry = dict(next(e for e in db if e["file"] == model))
entry["command"] = entry["command"].replace(model, unity)
entry["file"] = unity
entry.pop("output", None)
json.dump(db + [entry], open(path, "w"), indent=2)
PY
  local args=(-p "$dir" --quiet)
  [ -z "$checks" ] || args+=("--checks=$checks")
  [ -z "$filter" ] || args+=("--header-filter=$filter")
  clang-tidy-14 "${args[@]}" "$dir/$name.cpp" >"$dir/tidy-$name.log" 2>&1 &
  fold_pids+=($!)
  fold_logs+=("$dir/tidy-$name.log")
}

# fold_units DIR: what is checked folded (fold), and the rest one file at a time (patterns).
#   - The library's translation units (src/*.cpp, each only an #include of a folder's list,
#     include/fairsem/impl/<folder>/units.hpp), as DIR/units.cpp, which includes what each of
#     them includes, as header-only mode compiles them (the headers they share are parsed once). One check is
#     off there, misc-no-recursion: seeing the whole library at once, it reports call cycles that
#     exist by design and end after one turn (a connection found through Sentinel or a cluster
#     opens direct connections to ask where to go; a redirection reloads the scripts on the node
#     it was sent to).
#   - The `fairsem` command's files (tools/fairsem/*.cpp), as DIR/cli.cpp (each took about 35 s
#     alone, nearly all of it in the headers they share), with the header filter widened to
#     them and bugprone-suspicious-include off (it reports cli.cpp's own #include lines); but
#     watch.cpp, which names a constant as run.cpp does. The example programs stay apart: each
#     has its own main, usage text and Options.
fold_units() {
  local dir=$1 f units=() cli=() rest=()
  for f in "${files[@]}"; do
    if [[ "$f" == src/*.cpp && "$f" != src/*/* ]]; then
      units+=("$f")
    elif [[ "$f" == tools/fairsem/*.cpp && "$f" != tools/fairsem/watch.cpp ]]; then
      cli+=("$f")
    else
      rest+=("$f")
    fi
  done
  # Even one unit alone (the TLS pass checks src/net.cpp only): a folder's unit holds the
  # same cycles (Connection and Discovery), so it is checked the same way.
  if [ "${#units[@]}" -ge 1 ]; then
    # shellcheck disable=SC2016  # expanded by fold, for each file
    fold "$dir" units 'grep "^#include" "$f"' \
      -misc-no-recursion "" "${units[@]}"
  else
    rest+=("${units[@]}")
  fi
  if [ "${#cli[@]}" -gt 1 ]; then
    # shellcheck disable=SC2016
    fold "$dir" cli 'echo "#include \"$(realpath "$f")\""' -bugprone-suspicious-include \
      '/include/fairsem/|/tools/fairsem/[a-z_]+\.cpp$' "${cli[@]}"
  else
    rest+=("${cli[@]}")
  fi
  patterns=()
  for f in "${rest[@]}"; do patterns+=("^$(realpath "$f" | sed 's/[.[\*^$]/\\&/g')\$"); done
}

# tidy_pass DIR LABEL [CMAKE ARGS...]: configures DIR (compile_commands.json) and runs
# clang-tidy on "${files[@]}"; returns 1 on any finding.
tidy_pass() {
  local dir=$1 label=$2 log status findings patterns=() f fold_pids fold_logs
  shift 2
  fairsem_log "[tidy] configure $dir ($label)"
  # clang++-14 compiles what clang-tidy-14 parses, so no flag of another compiler confuses it.
  # FAIRSEM_INLINE=inline: the implementation (include/fairsem/impl/*/*-inl.hpp, which the
  # src/*.cpp include) is read as header-only mode compiles it, so misc-definitions-in-headers
  # passes it and finds any definition there that lacks FAIRSEM_INLINE (a duplicate symbol
  # header-only). Nothing is built from this directory.
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++-14 \
    -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DFAIRSEM_BUILD_TESTS=OFF -DFAIRSEM_BUILD_EXAMPLES=ON \
    -DFAIRSEM_BUILD_TOOLS=ON \
    -DFAIRSEM_INSTALL=OFF -DFAIRSEM_PROMETHEUS=ON "-DCMAKE_CXX_FLAGS=-DFAIRSEM_INLINE=inline" \
    "$@" >/dev/null
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
  fold_pids=()
  fold_logs=()
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
  for f in "${!fold_pids[@]}"; do
    wait "${fold_pids[$f]}" || status=1
    cat "${fold_logs[$f]}" >>"$log"
  done
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
  mapfile -t files < <(find src src/prometheus tools/fairsem tools/args examples -maxdepth 1 -name '*.cpp' \
    ! -path examples/asio_requests.cpp | sort)
fi
# A header given on its own is in no compile command: clang-tidy would check it without the
# build's flags and find nothing. Name the src/<folder>.cpp that includes it instead.
for f in "${files[@]}"; do
  if [[ "$f" == include/fairsem/impl/*/*-inl.hpp ]]; then
    folder=$(basename "$(dirname "$f")")
    echo "tidy.sh: $f is checked through src/$folder.cpp; pass that" >&2
    exit 2
  elif [[ "$f" == *-inl.hpp ]]; then
    echo "tidy.sh: $f is checked through the src/*.cpp that includes it; pass that" >&2
    exit 2
  fi
done
# FAIRSEM_TIDY_BUILD_DIR: another build directory (default build/ci-tidy).
status=0
tidy_pass "${FAIRSEM_TIDY_BUILD_DIR:-build/ci-tidy}" "Debian's hiredis" || status=1
# The TLS code (include/fairsem/impl/net/tls-inl.hpp, compiled by src/net.cpp) is compiled only
# against hiredis 1.x with hiredis_ssl: when the compat stage has built one, check it again with
# TLS on.
hiredis="build/compat/hiredis-${FAIRSEM_COMPAT_HIREDIS:-1.2.0}/prefix"
if [ -d "$hiredis/lib/cmake/hiredis" ] && [[ " ${files[*]} " == *" src/net.cpp "* ]]; then
  files=(src/net.cpp)
  tidy_pass "${FAIRSEM_TIDY_BUILD_DIR:-build/ci-tidy}-tls" "hiredis 1.x with TLS" \
    "-Dhiredis_DIR=$PWD/$hiredis/lib/cmake/hiredis" -DFAIRSEM_TLS=ON || status=1
fi
exit "$status"
