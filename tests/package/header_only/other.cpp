// The second translation unit of the header-only consumer (see main.cpp).
#include <fairsem/fairsem.hpp>

#include <cstring>

bool probe_refuses_port_zero() {
  auto opts = fairsem::ConnectionOptions::from_url("redis://127.0.0.1:6390");
  opts.port = 0;
  try {
    (void)fairsem::probe_server(opts);  // rejected before connecting
  } catch (const fairsem::InvalidArgument& e) {
    return std::strstr(e.what(), "port 0") != nullptr;
  }
  return false;
}
