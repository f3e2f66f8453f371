#!/usr/bin/env bash
# What one call from Lua costs inside a function (tests/bench/fold_probe/call_costs.lua), on a
# private redis-server: µs per call, all in (the command, the bridge to it, the loop), for the
# calls the semaphore's hot path makes, and a key created and deleted again against one that
# stays. The figures behind docs/benchmarks.md's plan for folding the data model.
#
#   bash tests/bench/call_costs.sh            # 3 rounds
#   CALL_COSTS_ROUNDS=5 bash tests/bench/call_costs.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
cd "$FAIRSEM_ROOT"
rounds=${CALL_COSTS_ROUNDS:-3}
fairsem_private_redis call-costs
work=$FAIRSEM_WORK
rcli FUNCTION LOAD "$(cat tests/bench/fold_probe/call_costs.lua)" >/dev/null
fairsem_log "redis-server $(redis-server --version | awk '{print $3}'), $rounds rounds, µs per call"
for round in $(seq "$rounds"); do
  rcli FCALL fairsem_call_costs 0 >"$work/round$round"
done
paste "$work"/round* | awk -F'\t' '{
  name = substr($1, 1, 32); line = sprintf("%-32s", name)
  for (i = 1; i <= NF; i++) line = line sprintf(" %7s", substr($i, 34))
  print line }'
