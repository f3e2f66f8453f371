#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang-14 (the library too is instrumented
# with ASan + UBSan) and runs each for FAIRSEM_FUZZ_SECONDS seconds (default 30), starting from
# a copy of its checked-in seed corpus. Fails on any crash, leak, timeout or failed check; the
# input that caused it is left in build/ci-fuzz/artifacts/ (rerun: <target> <file>).
#
#   bash scripts/fuzz.sh                                   # every target, 30 s each
#   FAIRSEM_FUZZ_SECONDS=600 bash scripts/fuzz.sh fuzz_replies
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$FAIRSEM_ROOT"

targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=(fuzz_url fuzz_replies)
for target in "${targets[@]}"; do
  if [ ! -d "tests/fuzz/corpus/$target" ]; then
    echo "unknown fuzz target '$target' (fuzz_url, fuzz_replies)" >&2
    exit 64
  fi
done
seconds="${FAIRSEM_FUZZ_SECONDS:-30}"

fairsem_ensure_packages clang-14 libclang-rt-14-dev

# FAIRSEM_FUZZ_BUILD_DIR: another build directory (default build/ci-fuzz).
dir="${FAIRSEM_FUZZ_BUILD_DIR:-build/ci-fuzz}"
fairsem_log "[fuzz] configure $dir (clang++-14, libFuzzer, ASan + UBSan)"
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-14 \
  "-DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
  -DFAIRSEM_BUILD_FUZZERS=ON -DFAIRSEM_BUILD_TESTS=OFF -DFAIRSEM_BUILD_EXAMPLES=OFF \
  -DFAIRSEM_BUILD_TOOLS=OFF -DFAIRSEM_INSTALL=OFF -DFAIRSEM_WERROR=ON >/dev/null
fairsem_log "[fuzz] build ${targets[*]}"
cmake --build "$dir" -j "$(fairsem_jobs)" --target "${targets[@]}"

# libFuzzer adds what it finds to the corpus directory: it gets a copy, so the checked-in seeds
# stay as they are.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$dir/artifacts"
summary=()
failed=()
for target in "${targets[@]}"; do
  cp -R "tests/fuzz/corpus/$target" "$work/$target"
  log="$dir/$target.log"
  fairsem_log "[fuzz] $target for $seconds s (log: $log)"
  set +e
  UBSAN_OPTIONS=print_stacktrace=1 "$dir/tests/fuzz/$target" "$work/$target" \
    -max_total_time="$seconds" -timeout=10 -detect_leaks=1 -print_final_stats=1 \
    -dict="tests/fuzz/$target.dict" -artifact_prefix="$dir/artifacts/$target-" >"$log" 2>&1
  status=$?
  set -e
  # libFuzzer ends a clean run with "Done N runs in S second(s)"; a failure never prints it.
  done_line="$(grep -E '^Done [0-9]+ runs in [0-9]+ second' "$log" | tail -n 1 || true)"
  if [ "$status" -eq 0 ] && [[ "$done_line" =~ ^Done\ ([0-9]+)\ runs\ in\ ([0-9]+) ]]; then
    runs="${BASH_REMATCH[1]}"
    secs="${BASH_REMATCH[2]}"
    summary+=("$target: ok, $runs runs in $secs s ($((runs / (secs > 0 ? secs : 1))) runs/s)")
  else
    tail -n 60 "$log" >&2
    summary+=("$target: FAILED (exit $status); see $log and $dir/artifacts/$target-*")
    failed+=("$target")
  fi
done

echo
printf '%s\n' "${summary[@]}"
[ "${#failed[@]}" -eq 0 ]
