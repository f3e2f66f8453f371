#!/usr/bin/env bash
# What folding the data model would save in the library's own code, measured rather than
# estimated from the inline prototype in fold_probe/: tests/bench/fold_probe/library_fold.patch
# changes the scripts of commit ba2c295 (the last one before the uncontended paths went inline)
# so that an uncontended pair makes the calls a folded data model would need (the counter, the
# holder and free counts in meta, written with the slot high-water mark in one HSET; a holder's
# owner info beside its slots), and library_ab.sh then runs that library (B) beside ba2c295's
# own (A), on one private redis-server. The patch keeps the data model working only for what
# library_ab.sh sends (a fresh id's grant and release, and a fresh waiter's grant through the
# holder's release): for measurement only, never for use.
#
#   bash tests/bench/fold_ab.sh                     # 30,000 of each, 6 rounds
#   AB_COUNT=40000 AB_ROUNDS=10 bash tests/bench/fold_ab.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
cd "$FAIRSEM_ROOT"
base=ba2c295
work=$(mktemp -d /tmp/fairsem-fold-ab.XXXXXX)
cleanup() {
  git worktree remove --force "$work/folded" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
git worktree add --quiet --detach "$work/folded" "$base"
git -C "$work/folded" apply "$FAIRSEM_ROOT/tests/bench/fold_probe/library_fold.patch"
fairsem_log "library A: $base; library B: $base with the folded calls (fold_probe/library_fold.patch)"
bash "$work/folded/tests/bench/library_ab.sh" "$base"
