#pragma once

// The stress harness's worker process (worker_main: `fairsem_stress --worker FD SLOT URL`), the
// mapping of the shared log that the driver creates and the workers write, and the clock and
// string helpers both sides use.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <new>
#include <set>
#include <stdexcept>
#include <string>
#include <system_error>

#include "fairsem/connection_options.hpp"
#include "shared_log.hpp"

namespace fairsem::stress {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}
inline std::int64_t to_ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
inline std::int64_t ms_to_ns(std::int64_t ms) { return ms * 1'000'000; }
/// How long each thread of this process has been runnable but not running so far (its
/// run-queue wait, /proc/self/task/TID/schedstat), in ns, by thread id; empty where the kernel
/// does not say.
std::map<int, std::int64_t> cpu_waits();
/// The longest any thread listed in both, but those in `skip`, waited for a CPU between two
/// cpu_waits(); -1 when either is empty.
std::int64_t longest_cpu_wait(const std::map<int, std::int64_t>& before,
                              const std::map<int, std::int64_t>& after, const std::set<int>& skip);

inline void copy_string(char* dst, std::size_t size, const std::string& src) {
  const std::size_t n = std::min(size - 1, src.size());
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

// --- the shared log ---------------------------------------------------------------------------

/// The log lives in a memfd: nothing to clean up however the run ends. Workers inherit the
/// descriptor (it is not close-on-exec) and map it by number.
class SharedMapping {
 public:
  /// Creates a log with room for `capacity` records.
  explicit SharedMapping(std::uint64_t capacity) : size_(SharedLog::bytes_for(capacity)) {
    fd_ = ::memfd_create("fairsem-stress-log", 0);
    if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "memfd_create");
    if (::ftruncate(fd_, static_cast<off_t>(size_)) != 0) {
      const int saved = errno;
      ::close(fd_);
      throw std::system_error(saved, std::generic_category(), "ftruncate of the log");
    }
    map();
    log_ = new (log_) SharedLog{};
    log_->magic = kMagic;
    log_->capacity = capacity;
  }
  /// Maps the log a driver created, by its inherited descriptor.
  explicit SharedMapping(int fd) : fd_(fd) {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw std::system_error(errno, std::generic_category(), "fstat");
    size_ = static_cast<std::size_t>(st.st_size);
    map();
    if (size_ < sizeof(SharedLog) || log_->magic != kMagic) {
      throw std::runtime_error("descriptor " + std::to_string(fd) + " is not a stress log");
    }
  }
  ~SharedMapping() {
    ::munmap(log_, size_);
    ::close(fd_);
  }
  SharedMapping(const SharedMapping&) = delete;
  SharedMapping& operator=(const SharedMapping&) = delete;

  SharedLog& log() const noexcept { return *log_; }
  int fd() const noexcept { return fd_; }

 private:
  void map() {
    void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap");
    log_ = static_cast<SharedLog*>(p);
  }

  int fd_ = -1;
  std::size_t size_ = 0;
  SharedLog* log_ = nullptr;
};

/// Takes the next record, naming the calling thread's tenant (current_tenant()); null (and the
/// run ends) when the log is full.
Record* next_record(SharedLog& log);

/// The worker process: maps the log by its inherited descriptor `log_fd` and runs the threads of
/// process slot `slot` against the server at `url` until the log says stop (the driver, or a
/// full log).
int worker_main(int log_fd, int slot, const std::string& url);

/// The threads of a worker process of the previous release (previous_worker.cpp), until the
/// log says stop.
void previous_worker(SharedLog& log, int slot, const ConnectionOptions& options);

}  // namespace fairsem::stress
