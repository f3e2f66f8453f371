// The records file of fairsem_contention: read (--external) and written (--records).

#include "contention_record.hpp"

#include <fmt/format.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace fairsem::bench::contention {

std::vector<Record> read_records(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read records from " + path);
  std::vector<Record> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    Record r;
    char comma = 0;
    std::istringstream fields(line);
    fields >> r.client >> comma >> r.ask_ns >> comma >> r.enter_ns >> comma >> r.release_ns >>
        comma >> r.token;
    if (!fields) throw std::runtime_error(fmt::format("malformed record in {}: {}", path, line));
    if (fields >> comma && !(fields >> r.units && r.units >= 1)) {
      throw std::runtime_error(fmt::format("malformed units in {}: {}", path, line));
    }
    long long slot = 0;
    while (fields >> comma) {
      if (!(fields >> slot)) throw std::runtime_error(fmt::format("malformed slot in {}", line));
      r.add_slot(slot);
    }
    out.push_back(r);
  }
  return out;
}

void write_records(const std::string& path, const std::vector<Record>& records, bool units) {
  std::ofstream out(path);
  for (const Record& r : records) {
    out << r.client << ',' << r.ask_ns << ',' << r.enter_ns << ',' << r.release_ns << ','
        << r.token;
    if (units) {
      out << ',' << r.units;
      for (std::int32_t k = 0; k < r.slots_kept; ++k) {
        out << ',' << r.slots[static_cast<std::size_t>(k)];
      }
    }
    out << '\n';
  }
  if (!out) throw std::runtime_error("cannot write records to " + path);
}

}  // namespace fairsem::bench::contention
