#!/usr/bin/env bash
# The README's main command: builds fairsem (release) and runs `fairsem demo`, which starts a
# private redis-server on a free loopback port in a temp dir, lets worker processes contend for
# a small limit, SIGKILLs one holder midway, prints a summary and stops the server again.
#
#   bash scripts/demo.sh [demo options, e.g. --workers 8 --limit 3 --seconds 30]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$FAIRSEM_ROOT"

fairsem_ensure_packages

dir="build/demo"
fairsem_log "building (release)"
cmake --preset release -B "$dir" -DFAIRSEM_BUILD_TESTS=OFF >/dev/null
cmake --build "$dir" -j "$(fairsem_jobs)" --target fairsem_cli >/dev/null
exec "$dir/tools/fairsem/fairsem" demo "$@"
