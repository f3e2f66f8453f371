#pragma once

// What one fairsem_contention run is asked to do: its command-line options (see run() in
// contention.cpp for each one's meaning), read by the clients and by the analysis.

#include <cstddef>
#include <string>
#include <vector>

namespace fairsem::bench::contention {

struct Settings {
  std::string url;
  std::string mode = "threads";
  std::string impl = "fairsem";
  std::string name = "contention";
  std::string records_path;
  std::string external;
  int clients = 8;
  long long limit = 1;
  double hold_ms = 1;
  double seconds = 10;
  double fifo_tolerance_us = 100;
  double fifo_grant_tolerance_us = 0;
  std::vector<long long> weights;  // empty: every request asks for 1 unit and waits for it
  bool check = false;

  bool weighted() const { return !weights.empty(); }
  long long units_of(int client) const {
    return weighted() ? weights[static_cast<std::size_t>(client) % weights.size()] : 1;
  }
};

}  // namespace fairsem::bench::contention
