#pragma once

// The figures of a fairsem_contention run, from its recorded requests alone: the JSON line the
// program prints.

#include <nlohmann/json.hpp>
#include <vector>

#include "bench_support.hpp"
#include "contention_record.hpp"
#include "contention_settings.hpp"

namespace fairsem::bench::contention {

/// The run's JSON: its settings, then grants/s, waits, hand-offs (limit 1), the most holders
/// and units at once, the order checks (contention_order.hpp), the figures per weight
/// (weighted runs) and what Redis paid per grant. `all` holds every recorded request: those
/// granted and, in weighted runs, those that gave up when the run ended; `used` is the
/// server's counters over the run.
nlohmann::json analyze(const Settings& s, const std::vector<Record>& all, const ServerStats& used);

}  // namespace fairsem::bench::contention
