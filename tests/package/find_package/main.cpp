// A consumer of an installed fairsem: includes the umbrella header (which must not need
// hiredis on the include path), links the compiled part and uses it.
#include <fairsem/fairsem.hpp>

#include <cstdio>
#include <cstring>

int main() {
  auto opts = fairsem::ConnectionOptions::from_url("redis://alice:pw@127.0.0.1:6390/2");
  if (opts.port != 6390 || opts.db != 2 || opts.user != "alice") return 1;
  opts.port = 0;
  try {
    (void)fairsem::probe_server(opts);  // links the compiled part; rejected before connecting
    return 1;
  } catch (const fairsem::InvalidArgument& e) {
    if (std::strstr(e.what(), "port 0") == nullptr) return 1;
  }
  std::printf("consumer linked fairsem %s\n", fairsem::version());
  return 0;
}
