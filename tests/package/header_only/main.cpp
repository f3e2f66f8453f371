// A consumer of header-only fairsem (FAIRSEM_HEADER_ONLY, the CMake target
// fairsem::fairsem_header_only): the umbrella header alone brings the implementation, and
// nothing of fairsem is linked. Two translation units include it (this one and other.cpp), so
// a definition that is not inline shows up as a duplicate symbol at link time.
#include <fairsem/fairsem.hpp>

#include <cstdio>
#include <cstring>

#ifndef FAIRSEM_HEADER_ONLY
#error "this consumer is built with fairsem::fairsem_header_only, which defines FAIRSEM_HEADER_ONLY"
#endif

bool probe_refuses_port_zero();  // other.cpp

int main() {
  auto opts = fairsem::ConnectionOptions::from_url("redis://alice:pw@127.0.0.1:6390/2");
  if (opts.port != 6390 || opts.db != 2 || opts.user != "alice") return 1;
  // A Client validates its options and connects nothing until a semaphore is opened.
  const fairsem::Client client(opts);
  if (client.connection().port != 6390) return 1;
  try {
    (void)fairsem::Client(opts, fairsem::ClientOptions{0, 1});
    return 1;
  } catch (const fairsem::InvalidArgument& e) {
    if (std::strstr(e.what(), "max_connections") == nullptr) return 1;
  }
  if (!probe_refuses_port_zero()) return 1;
  std::printf("header-only consumer of fairsem %s\n", fairsem::version());
  return 0;
}
