#pragma once

// The test's redis-server reached through a CuttingProxy, for the tests that lose replies.

#include "cutting_proxy.hpp"
#include "fairsem/connection_options.hpp"
#include "redis_server.hpp"
#include "test_env.hpp"

namespace fairsem::test {

/// The port a proxy forwards to: the test's own redis-server (or FAIRSEM_TEST_REDIS_URL's).
inline int upstream_port() {
  auto* server = RedisEnvironment::instance().server();
  return server != nullptr ? server->port() : redis_options().port;
}

/// The test server's options (credentials, db, timeouts), reached through `proxy`.
inline ConnectionOptions through(const CuttingProxy& proxy) {
  ConnectionOptions o = redis_options();
  o.unix_path.clear();
  o.host = "127.0.0.1";
  o.port = proxy.port();
  return o;
}

}  // namespace fairsem::test
