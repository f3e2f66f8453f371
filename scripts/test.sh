#!/usr/bin/env bash
# Builds fairsem and runs every test, in each configuration CI requires:
#   cxx17  Debug, C++17, warnings as errors
#   cxx20  Release, C++20, warnings as errors, with the benchmarks (each runs about a second)
#   asan   AddressSanitizer + UndefinedBehaviorSanitizer
#   tsan   ThreadSanitizer
#   tidy   clang-tidy 14 over src/ and include/ (scripts/tidy.sh), every finding an error
#   fuzz   each libFuzzer target for FAIRSEM_FUZZ_SECONDS (30) seconds (scripts/fuzz.sh)
# plus a clang-format check. Installs missing Debian packages itself; the tests start their
# own redis-server processes on free loopback ports.
#
#   bash scripts/test.sh              # everything (what CI runs)
#   bash scripts/test.sh cxx17 asan   # only these configurations
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$FAIRSEM_ROOT"

configs=("$@")
[ "${#configs[@]}" -gt 0 ] || configs=(cxx17 cxx20 asan tsan tidy fuzz)

fairsem_ensure_packages

fairsem_log "checking clang-format"
mapfile -t sources < <(git ls-files '*.hpp' '*.cpp' 2>/dev/null || find include src tests examples -name '*.[ch]pp')
clang-format --dry-run -Werror "${sources[@]}"

total_pass=0
total_fail=0
failed_configs=()
for config in "${configs[@]}"; do
  extra=()
  case "$config" in
    cxx17) preset=dev;     std=17; env=() ;;
    cxx20) preset=release; std=20; env=(); extra=(-DFAIRSEM_BUILD_BENCHMARKS=ON) ;;
    asan)  preset=asan;    std=17; env=(ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
                                         UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1) ;;
    tsan)  preset=tsan;    std=17; env=(TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1) ;;
    tidy|fuzz)
      # One check each: counted as one passed or failed test.
      if bash "scripts/$config.sh"; then
        total_pass=$((total_pass + 1))
      else
        failed_configs+=("$config")
        total_fail=$((total_fail + 1))
      fi
      continue ;;
    *) echo "unknown configuration '$config' (cxx17, cxx20, asan, tsan, tidy, fuzz)" >&2; exit 64 ;;
  esac
  dir="build/ci-$config"
  fairsem_log "[$config] configure ($preset preset, C++$std, -Werror)"
  cmake --preset "$preset" -B "$dir" -DFAIRSEM_WERROR=ON -DCMAKE_CXX_STANDARD="$std" "${extra[@]}" >/dev/null
  fairsem_log "[$config] build"
  cmake --build "$dir" -j "$(fairsem_jobs)"
  fairsem_log "[$config] test"
  log="$dir/ctest.log"
  set +e
  env "${env[@]}" ctest --test-dir "$dir" -j "$(fairsem_jobs)" --output-on-failure 2>&1 | tee "$log"
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
    echo "[$config] $skipped test(s) were skipped or not run; that counts as failure" >&2
    total_fail=$((total_fail + skipped))
    status=1
  fi
  if [ "$status" -ne 0 ] || [ -z "$line" ]; then
    failed_configs+=("$config")
    [ -n "$line" ] || total_fail=$((total_fail + 1))
  fi
done

echo
if [ "${#failed_configs[@]}" -gt 0 ]; then
  echo "FAILED configurations: ${failed_configs[*]}"
fi
echo "tests: $total_pass passed, $total_fail failed"
[ "${#failed_configs[@]}" -eq 0 ]
