#pragma once

// `fairsem demo`'s own redis-server: on a free loopback port, in a temp dir, both gone with
// the object.

#include <sys/types.h>

#include <string>

namespace fairsem::cli {

class PrivateRedis {
 public:
  /// Starts redis-server (from PATH) in a new temp dir; throws std::system_error if it cannot.
  PrivateRedis();
  /// Stops the server (SIGTERM, waited for) and removes its directory.
  ~PrivateRedis();
  PrivateRedis(const PrivateRedis&) = delete;
  PrivateRedis& operator=(const PrivateRedis&) = delete;

  /// Waits until the server answers (called once constructed, so a failure still cleans up);
  /// throws ConnectionError if it exited or did not answer within 10 s.
  void wait_until_ready();

  const std::string& url() const noexcept { return url_; }

 private:
  void start();
  /// The last line of the server's log, for an error message.
  std::string log_tail() const;

  std::string dir_;
  std::string url_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace fairsem::cli
