#!/usr/bin/env bash
# Builds fairsem and runs every test, in each configuration CI requires:
#   asan   Debug, C++17, warnings as errors, AddressSanitizer + UndefinedBehaviorSanitizer, with
#          Debian's hiredis: every test, the packaging ones (find_package, add_subdirectory,
#          pkg-config, the .deb, the examples built standalone) among them
#   tsan   Debug, C++17, warnings as errors, ThreadSanitizer, with Debian's hiredis: every test
#          but the packaging ones (they build consumers; they run no code of fairsem's threads)
#          and the Prometheus one (label prometheus: its processes run Debian's prometheus-cpp
#          and civetweb, which are not built with TSan, whose atomics it cannot see)
#   compat Release (-O2; the tests' own code -O0), C++20, warnings as errors, with the
#          benchmarks (each runs a second), against hiredis 1.2.0 and the other servers fairsem
#          supports, built from the compat tarballs (scripts/compat.sh): the tests that need no
#          server of their own (unit, packaging with hiredis 1.2.0's own CMake config, but the
#          three that build fairsem from source, which asan runs); with TLS (hiredis_ssl), the
#          integration, deployment and stress tests on Debian's redis-server speaking only TLS
#          (FAIRSEM_TEST_TLS=1); then the integration, deployment and stress tests (the TLS
#          tests among them) on each of Valkey 8.0.1, Redis 6.2.16 and Redis 7.2.6, built with
#          TLS (a 20 s stress run, two tests per core)
#   tidy   clang-tidy 14 over src/ and include/ (scripts/tidy.sh), every finding an error
#   fuzz   each libFuzzer target for FAIRSEM_FUZZ_SECONDS (30) seconds (scripts/fuzz.sh)
#          (tidy and fuzz, after compat, run beside compat's test passes at nice 19, fuzz for
#          15 s a target there: those passes mostly wait on their servers)
# Every configuration builds fairsem::prometheus and `fairsem exporter` (FAIRSEM_PROMETHEUS=ON:
# prometheus-cpp-dev is installed); asan runs the test against a real Prometheus.
# So each standard (17, 20), build type, hiredis (Debian's 0.14.1, 1.2.0) and sanitizer is
# built with warnings as errors and runs the tests. CI builds are unity builds
# (CMAKE_UNITY_BUILD: eight sources compiled as one; a fifth less compile time), and each
# configuration after the first builds ahead, beside the tests of the one before it, at idle
# priority (start_builds_ahead below). The library's sources compile one by one in asan's
# package tests (a consumer's add_subdirectory) and in tidy. Every configuration that builds the
# tests builds header-only mode too (header_only.consumer and the package tests' header-only
# consumers), with its own standard and flags. CI builds carry line tables only (-g1): a
# sanitizer's report still names file and line, and the builds take a quarter less time.
# Two more, not run by default: cxx17 (Debug, C++17, every test) and cxx20 (Release, C++20,
# with the benchmarks, every test), both with Debian's hiredis.
# Plus a clang-format check and a check of the Markdown files' relative links. Installs missing
# Debian packages itself; the tests start their own redis-server processes on free loopback
# ports.
#
#   bash scripts/test.sh              # everything CI runs
#   bash scripts/test.sh cxx17 asan   # only these configurations
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/compat.sh"
cd "$FAIRSEM_ROOT"

configs=("$@")
[ "${#configs[@]}" -gt 0 ] || configs=(asan tsan compat tidy fuzz)

# prometheus-cpp for fairsem::prometheus and `fairsem exporter` (built ON here, so that a
# missing one fails the configure), and Debian's prometheus server, which their test starts.
fairsem_ensure_packages prometheus-cpp-dev prometheus
# What compat's build needs (installed now: it may build ahead, beside another stage's tests).
case " ${configs[*]} " in *" compat "*) fairsem_ensure_packages libssl-dev openssl make ;; esac

fairsem_log "checking clang-format"
mapfile -t sources < <(git ls-files '*.hpp' '*.cpp' 2>/dev/null || find include src tests examples -name '*.[ch]pp')
clang-format --dry-run -Werror "${sources[@]}"
fairsem_log "checking the links of the Markdown files"
python3 scripts/check_links.py

# What an earlier run of the checks beside compat left (start_background_checks).
rm -f build/ci-tidy.out build/ci-tidy.rc build/ci-fuzz.out build/ci-fuzz.rc

total_pass=0
total_fail=0
failed_configs=()
failed_tests=()  # "[tag] name (reason)", repeated at the end where CI's excerpt of the log shows it
failed_logs=()

# run_ctest TAG DIR [VAR=VALUE... --] [CTEST ARGS...]: runs ctest in DIR with those environment
# variables, ctest_jobs tests at a time (one per core if unset), adds its counts to the totals
# and fails TAG when a test failed or was skipped.
run_ctest() {
  local tag=$1 dir=$2 env=() log status line skipped
  shift 2
  if [[ " $* " == *" -- "* ]]; then
    while [ "$1" != "--" ]; do env+=("$1"); shift; done
    shift
  fi
  log="$dir/ctest-${tag//[^a-z0-9.-]/_}.log"
  fairsem_log "[$tag] test"
  set +e
  env "${env[@]}" ctest --test-dir "$dir" -j "${ctest_jobs:-$(fairsem_jobs)}" --output-on-failure \
    "$@" 2>&1 |
    tee "$log"
  status=${PIPESTATUS[0]}
  set -e
  line=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | tail -n 1 || true)
  if [[ "$line" =~ ([0-9]+)\ tests\ failed\ out\ of\ ([0-9]+) ]]; then
    total_fail=$((total_fail + BASH_REMATCH[1]))
    total_pass=$((total_pass + BASH_REMATCH[2] - BASH_REMATCH[1]))
  fi
  # A skipped test is not a passed one: fail the configuration if ctest skipped anything.
  skipped=$(grep -cE '\((Skipped|Not Run|Disabled)\)' "$log" || true)
  if [ "$skipped" -gt 0 ]; then
    echo "[$tag] $skipped test(s) were skipped or not run; that counts as failure" >&2
    total_fail=$((total_fail + skipped))
    status=1
  fi
  if [ "$status" -ne 0 ] || [ -z "$line" ]; then
    mapfile -t -O "${#failed_tests[@]}" failed_tests < <(
      sed -n '/The following tests FAILED:/,$p' "$log" | grep -E '^[[:space:]]+[0-9]+ - ' |
        sed -E "s/^[[:space:]]+[0-9]+ - /[$tag] /")
    failed_logs+=("$log")
    failed_configs+=("$tag")
    [ -n "$line" ] || total_fail=$((total_fail + 1))
  fi
}

# failed_outputs LOG: what each test that failed in ctest's LOG printed (its first 150 lines:
# a failure's message, and the stacks or log lines a test adds to it), or, where ctest printed
# no such block (it failed to start, say), the lines of LOG that say what went wrong.
failed_outputs() {
  awk '
    /^ *[0-9]+\/[0-9]+ Test +#[0-9]+: / {
      block = ($0 !~ / Passed /); lines = 0
      if (block) { print; found = 1 }
      next
    }
    /^ +Start +[0-9]+: / || /^[0-9]+% tests passed/ { block = 0; next }
    block && lines < 150 { print; lines++ }
    END { exit found ? 0 : 1 }' "$1" ||
    grep -E ': Failure$|^Expected|^  Actual|Which is|WARNING: ThreadSanitizer|ERROR: (Address|Leak)Sanitizer|runtime error:|SIGSEGV|Segmentation|\*\*\*Exception|Timeout|threw|^\[  FAILED  \]' \
      "$1" | head -n 40
}

# build_config TAG PRESET STD [CMAKE ARGS...]: configures and builds build/ci-TAG.
build_config() {
  local tag=$1 preset=$2 std=$3 dir="build/ci-$1"
  shift 3
  fairsem_log "[$tag] configure ($preset preset, C++$std, -Werror)"
  cmake --preset "$preset" -B "$dir" -DFAIRSEM_WERROR=ON -DCMAKE_CXX_STANDARD="$std" \
    -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DFAIRSEM_PROMETHEUS=ON -DCMAKE_UNITY_BUILD=ON "$@" >/dev/null
  fairsem_log "[$tag] build"
  cmake --build "$dir" -j "$(fairsem_jobs)"
}

# Tests that only make sense in plaintext: a proxy that reads the RESP stream, fake servers.
FAIRSEM_TLS_PLAINTEXT_ONLY='LostReplyTest|LostWakeUpTest|BusyPoolTest|SecurityAclTest\.ConnectionAuthAndPermissionErrorsNeverShowThePassword|SecurityAclTest\.LogsNeverShowThePasswordWhenAReconnectReachesAWrongHost'
# The packaging tests that build fairsem (or the examples) from source in a consumer: what they
# add to the build itself (which finds hiredis the same way) does not depend on the hiredis, so
# they run once, in asan, and not again in compat; the consumers of the installed package (and
# the .deb, pkg-config, hiredis' own CMake config) run in both.
FAIRSEM_FROM_SOURCE_PACKAGE_TESTS='^(package\.add_subdirectory|package\.add_subdirectory_header_only|examples\.standalone_build)$'
# Not run on a server without functions (Redis 6.2): the tests of what only a server with them
# can do (flush the library, refuse FCALL by ACL, hold a foreign library, flag functions
# allow-oom). The first FunctionLibraryTest case runs everywhere and checks the EVALSHA
# fallback there.
# Nor the LOADING test: Redis 6.2 refuses the option it uses to make a small dataset's load
# answer LOADING, loading-process-events-interval-bytes (Redis 7.0 on).
FAIRSEM_REDIS7_ONLY='FunctionLibraryTest\.(AFunctionFlush|AUserWith|AForeignLibrary|OutOfMemory)|RideOutTest\.WaitersRideOutALoadingServer'

# tidy and fuzz need no server and mostly the CPU, which compat's test passes leave idle (they
# wait on their servers): asked for after compat, they run beside those passes, one after the
# other, at the lowest priority (nice 19), so that a test's thread gets a core the moment it
# wants one. Their output is shown, and counted, at their own place in the list.
background_pid=""
start_background_checks() {
  local wanted=() after_compat=false c
  for c in "${configs[@]}"; do
    if [ "$c" = compat ]; then
      after_compat=true
    elif $after_compat && { [ "$c" = tidy ] || [ "$c" = fuzz ]; }; then
      wanted+=("$c")
    fi
  done
  [ "${#wanted[@]}" -gt 0 ] || return 0
  fairsem_ensure_packages clang-tidy-14 clang-14 libclang-rt-14-dev  # apt, before, not beside
  fairsem_log "[${wanted[*]}] started beside compat's tests (nice 19)"
  # One after the other: side by side they took as long (the CPU is what they wait for), and
  # in the one run where they were, two process tests hung in compat's last pass (the cause is
  # not known yet). Fuzz runs each target 15 s here (FAIRSEM_FUZZ_SECONDS, 30 by default): it
  # comes last, after tidy.
  (
    for c in "${wanted[@]}"; do
      rc=0
      FAIRSEM_FUZZ_SECONDS="${FAIRSEM_FUZZ_SECONDS:-15}" nice -n 19 bash "scripts/$c.sh" \
        >"build/ci-$c.out" 2>&1 || rc=$?
      echo "$rc" >"build/ci-$c.rc"
    done
  ) &
  background_pid=$!
}

# run_check NAME: scripts/NAME.sh (tidy, fuzz), or what its run beside compat's tests printed;
# one check, counted as one passed or failed test.
run_check() {
  local name=$1 rc=0
  if [ -n "$background_pid" ]; then
    wait "$background_pid" 2>/dev/null || true  # at the second check, already waited for
  fi
  if [ -f "build/ci-$name.rc" ]; then
    fairsem_log "[$name] (ran beside compat's tests)"
    cat "build/ci-$name.out"
    rc=$(cat "build/ci-$name.rc")
  else
    bash "scripts/$name.sh" || rc=$?
  fi
  if [ "$rc" -eq 0 ]; then
    total_pass=$((total_pass + 1))
  else
    failed_configs+=("$name")
    total_fail=$((total_fail + 1))
  fi
}

# Builds ahead: a configuration's tests mostly wait on their servers (half the CPU idle or more,
# measured in the asan stage's test pass), so while they run, the builds of the configurations
# after it run beside them, one after the other, at idle priority (SCHED_IDLE: a build gets a
# core only when no test wants it). Each writes build/ci-TAG.ahead.log and its status to
# build/ci-TAG.ahead.rc. A configuration built ahead waits for that build, shows its output, and
# builds again in the foreground: nothing to do when it passed, its errors again when it failed.
ahead_pid=""
ahead_configs=""
start_builds_ahead() {
  local after=false wanted=() c
  [ -z "$ahead_pid" ] || return 0
  for c in "${configs[@]}"; do
    if [ "$c" = "$1" ]; then
      after=true
    elif $after; then
      case "$c" in
        cxx17|cxx20|asan|tsan) wanted+=("$c") ;;
        compat) [ -z "$(fairsem_compat_dir)" ] || wanted+=("$c") ;;
      esac
    fi
  done
  [ "${#wanted[@]}" -gt 0 ] || return 0
  for c in "${wanted[@]}"; do rm -f "build/ci-$c.ahead.log" "build/ci-$c.ahead.rc"; done
  fairsem_log "[${wanted[*]}] building ahead, beside [$1]'s tests (SCHED_IDLE)"
  (
    chrt --idle -p 0 "$BASHPID"  # inherited by every process of the builds
    for c in "${wanted[@]}"; do
      # Waited for, not tested with ||: a failing step then ends the build, as set -e would.
      (build_steps "$c") >"build/ci-$c.ahead.log" 2>&1 &
      rc=0
      wait $! || rc=$?
      echo "$rc" >"build/ci-$c.ahead.rc"
    done
  ) &
  ahead_pid=$!
  ahead_configs="${wanted[*]}"
}

# await_build_ahead CONFIG: waits for CONFIG's build ahead, if one was started, and shows it.
await_build_ahead() {
  [[ " $ahead_configs " == *" $1 "* ]] || return 0
  while [ ! -f "build/ci-$1.ahead.rc" ] && kill -0 "$ahead_pid" 2>/dev/null; do sleep 1; done
  fairsem_log "[$1] built ahead, status $(cat "build/ci-$1.ahead.rc" 2>/dev/null || echo unknown):"
  cat "build/ci-$1.ahead.log"
  # The last of them: the builder is reaped and forgotten, so that the EXIT trap cannot signal
  # another process that has its pid since.
  if [ "$1" = "${ahead_configs##* }" ]; then
    wait "$ahead_pid" 2>/dev/null || true
    ahead_pid=""
  fi
}

# kill_tree PID: PID and every process under it.
kill_tree() {
  local child
  for child in $(pgrep -P "$1" 2>/dev/null); do kill_tree "$child"; done
  kill "$1" 2>/dev/null || true
}
# What runs in the background does not outlive this script.
trap '[ -z "$ahead_pid" ] || kill_tree "$ahead_pid"; [ -z "$background_pid" ] || kill_tree "$background_pid"' EXIT

# The compat stage's build (see the top of this file and scripts/compat.sh): hiredis 1.2.0 and
# the servers from the compat tarballs, then fairsem against that hiredis.
build_compat() {
  local hiredis="$FAIRSEM_ROOT/build/compat/hiredis-$FAIRSEM_COMPAT_HIREDIS/prefix"
  fairsem_log "[compat] building the compat dependencies from $1"
  fairsem_compat_build "$1"
  # With TLS (hiredis_ssl is built beside hiredis): ON, so that a missing piece fails here.
  # -O2, as Debian builds its packages (CMake's Release default is -O3, which compiles slower).
  # The tests' own code at -O0 (FAIRSEM_TEST_COMPILE_OPTIONS): the library, examples and
  # benchmarks are what is optimised; the tests' code took half this build's time at -O2.
  build_config compat release 20 "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" \
    -DFAIRSEM_TEST_COMPILE_OPTIONS=-O0 \
    "-Dhiredis_DIR=$hiredis/lib/cmake/hiredis" \
    "-DFAIRSEM_TEST_HIREDIS_PREFIX=$hiredis" -DFAIRSEM_TLS=ON -DFAIRSEM_BUILD_BENCHMARKS=ON
}

# The compat stage's tests.
run_compat() {
  local compat dir=build/ci-compat server name version exclude
  compat=$(fairsem_compat_dir)
  if [ -z "$compat" ]; then
    if [ "${CI:-}" = "true" ]; then
      echo "[compat] the compat tarballs (../shared/compat) are missing; CI needs them" >&2
      failed_configs+=(compat)
      total_fail=$((total_fail + 1))
    else
      fairsem_log "[compat] skipped: no compat tarballs (../shared/compat or \$FAIRSEM_COMPAT_DIR)"
    fi
    return 0
  fi
  await_build_ahead compat
  # Waited for, not tested with if: a failing step then ends the build, as set -e would.
  (build_compat "$compat") &
  if ! wait $!; then
    failed_configs+=(compat)
    total_fail=$((total_fail + 1))
    return 0
  fi
  start_background_checks
  # What needs no server of the tests' own (unit, package, harness tests; not the Prometheus
  # test, which asan runs: what it checks does not depend on the hiredis); the tests against
  # servers run below, over TLS on Debian's and in plaintext on each other server (with
  # hiredis 1.2.0 as here; in plaintext on Debian's with hiredis 0.14 in asan and tsan).
  run_ctest "compat.hiredis-$FAIRSEM_COMPAT_HIREDIS" "$dir" \
    "FAIRSEM_TEST_EXPECT_SERVER=redis $(redis-server --version | sed -E 's/.* v=([0-9.]+).*/\1/')" \
    -- -LE 'integration|deployment|stress|prometheus' -E "$FAIRSEM_FROM_SOURCE_PACKAGE_TESTS"
  # TLS: every server the tests start speaks only TLS (here Debian's redis-server, built with
  # it). Not run there: the tests that put a plaintext RESP-reading proxy (LostReplyTest,
  # LostWakeUpTest) or a plaintext fake server (two SecurityAclTest cases) between fairsem and
  # Redis; they run on the other servers below.
  # Three tests at a time on two cores, and a 20 s stress run: the pass mostly waits on its
  # servers too (209 s at one test per core, with a 45 s stress run, in the run before).
  local ctest_jobs
  ctest_jobs=$(($(fairsem_jobs) * 3 / 2))
  run_ctest "compat.tls" "$dir" FAIRSEM_TEST_TLS=1 FAIRSEM_STRESS_SECONDS=20 \
    "FAIRSEM_TEST_EXPECT_SERVER=redis $(redis-server --version | sed -E 's/.* v=([0-9.]+).*/\1/')" \
    -- -L 'integration|deployment|stress' -E "$FAIRSEM_TLS_PLAINTEXT_ONLY"
  # On each other server a stress run of 20 s instead of 45 (every fault kind is still injected
  # two or three times; the 45 s runs are asan's and tsan's), and two tests per core:
  # these runs mostly wait on their servers (about a fifth of the CPU busy; 108 -> 83 s on
  # Valkey when measured).
  ctest_jobs=$(($(fairsem_jobs) * 2))
  for server in "${FAIRSEM_COMPAT_SERVERS[@]}"; do
    read -r name version <<<"$server"
    exclude=()
    [ "$name" != redis ] || [ "${version%%.*}" -ge 7 ] || exclude=(-E "$FAIRSEM_REDIS7_ONLY")
    run_ctest "compat.$name-$version" "$dir" \
      "PATH=$FAIRSEM_ROOT/build/compat/$name-$version/bin:$PATH" FAIRSEM_STRESS_SECONDS=20 \
      "FAIRSEM_TEST_EXPECT_SERVER=$name $version" -- -L 'integration|deployment|stress' \
      "${exclude[@]}"
  done
}

# config_settings CONFIG: the preset, standard, extra CMake arguments, test environment and
# ctest label arguments of CONFIG (cxx17, cxx20, asan, tsan).
config_settings() {
  extra=()
  env=()
  labels=()
  case "$1" in
    cxx17) preset=dev;     std=17 ;;
    cxx20) preset=release; std=20; extra=(-DFAIRSEM_BUILD_BENCHMARKS=ON) ;;
    asan)  preset=asan;    std=17; env=(ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
                                         UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1) ;;
    tsan)  preset=tsan;    std=17; env=(TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1)
           labels=(-LE 'package|prometheus') ;;
    *) return 1 ;;
  esac
}

# build_steps CONFIG: the whole build of CONFIG (for compat, its servers and hiredis first).
build_steps() {
  if [ "$1" = compat ]; then
    build_compat "$(fairsem_compat_dir)"
  else
    config_settings "$1"
    build_config "$1" "$preset" "$std" "${extra[@]}"
  fi
}

for config in "${configs[@]}"; do
  case "$config" in
    cxx17|cxx20|asan|tsan) ;;
    compat) run_compat; continue ;;
    tidy|fuzz) run_check "$config"; continue ;;
    *) echo "unknown configuration '$config' (cxx17, cxx20, asan, tsan, compat, tidy, fuzz)" >&2
       exit 64 ;;
  esac
  await_build_ahead "$config"
  build_steps "$config"
  start_builds_ahead "$config"
  config_settings "$config"
  run_ctest "$config" "build/ci-$config" "${env[@]}" -- "${labels[@]}"
done

echo
if [ "${#failed_configs[@]}" -gt 0 ]; then
  # What failed, and the lines of its output that say how (the whole output is in the logs).
  for log in "${failed_logs[@]}"; do
    echo "--- from $log:"
    failed_outputs "$log" | head -n 400 || true
  done
  printf 'FAILED test: %s\n' "${failed_tests[@]}"
  echo "FAILED configurations: ${failed_configs[*]}"
fi
echo "tests: $total_pass passed, $total_fail failed"
[ "${#failed_configs[@]}" -eq 0 ]
