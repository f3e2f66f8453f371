// fairsem-migration-job: a scheduled batch job (copy data from one database to another) that
// cron starts on several machines at the same moment. Running it on more than one machine at
// once is fine, up to N at a time (the databases only take so much load, and rows copied twice
// are ignored as duplicates), so the machines share a FairSemaphore with limit N.
//
//   fairsem-migration-job --machine NAME [--url URL] [--name SEMAPHORE] [--limit N]
//                         [--wait SECONDS] [--state FILE]
//
// The permit id is fixed per machine ("migration-" + NAME), not random: a machine never takes
// two of the N slots, and a job restarted after a crash gets its own permit back (same
// fencing token) at once instead of waiting for the crashed run's lease to run out. A second
// copy started on the same machine shares that permit; add a local lock if that must not
// happen. A job that gets no permit within --wait seconds (default 30) gives up: the other
// machines are doing the work.
//
// The write is fenced. A lease can run out under a holder that stops without knowing it (a
// long pause, a network partition): its permit passes to another machine, and when the paused
// job resumes it still thinks it holds one. Only the resource it writes to can tell, by the
// fencing token: tokens grow in grant order, so a resumed job carries an older token than
// the writes made after its permit passed on. The resource keeps the newest token that wrote
// and refuses older ones, in the same atomic step as the write. In production that is the
// target database (a row with a version column, `UPDATE ... WHERE version <= :token`); here
// it is a state file holding "<token> <machine>", checked and written under flock(LOCK_EX).
// An equal token is the same permit writing again (a retry or a restart), and is allowed.
//
// Prints "machine=<NAME> token=<T> permit=<ID> granted" once it holds the permit, then one
// line "machine=<NAME> token=<T|none> wrote=yes|no".
// URL defaults to $FAIRSEM_URL, then $REDIS_URL, then redis://127.0.0.1:6379.
// Exit codes: 0 written, 64 usage error, 69 Redis unreachable or auth failed, 70 other error,
// 75 no permit within --wait, or the write was refused (a newer token wrote first).

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fairsem/fairsem.hpp>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>

#include "args.hpp"

namespace {

namespace args = fairsem::args;
using args::kExitInternal;
using args::kExitTempFail;
using args::kExitUnavailable;
using args::kExitUsage;

constexpr const char* kUsage =
    "usage: fairsem-migration-job --machine NAME [--url URL] [--name SEMAPHORE] [--limit N] "
    "[--wait SECONDS] [--state FILE]\n";

int usage(const std::string& problem) {
  fmt::print(stderr, "fairsem-migration-job: {}\n{}", problem, kUsage);
  return kExitUsage;
}

/// Throws "<what>: <errno's description>".
[[noreturn]] void throw_errno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

struct WriteResult {
  bool wrote = false;
  long long stored_token = 0;  // the newest token that wrote before this attempt (0: none)
  std::string stored_machine;
};

// The fenced resource: writes "<token> <machine>" to `path` unless it already holds a newer
// token. The check and the write happen under one exclusive flock, so they are atomic with
// respect to every other job that uses the file.
WriteResult fenced_write(const std::string& path, long long token, const std::string& machine) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw_errno("cannot open state file " + path);
  struct Closer {
    int handle;
    ~Closer() { ::close(handle); }  // also drops the flock
  } closer{fd};
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR) throw_errno("cannot lock state file " + path);
  }
  std::string content;
  std::array<char, 256> chunk{};
  for (;;) {
    const ssize_t n = ::pread(fd, chunk.data(), chunk.size(), static_cast<off_t>(content.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("cannot read state file " + path);
    if (n == 0) break;
    content.append(chunk.data(), static_cast<std::size_t>(n));
  }
  WriteResult result;
  if (!content.empty()) {
    std::istringstream in(content);
    if (!(in >> result.stored_token >> result.stored_machine) || result.stored_token < 1) {
      throw std::runtime_error("state file " + path +
                               " does not hold \"<token> <machine>\": refusing to overwrite it");
    }
  }
  if (token < result.stored_token) return result;  // an older permit: refused
  const std::string line = fmt::format("{} {}\n", token, machine);
  if (::ftruncate(fd, 0) != 0) throw_errno("cannot truncate state file " + path);
  if (::pwrite(fd, line.data(), line.size(), 0) != static_cast<ssize_t>(line.size())) {
    throw_errno("cannot write state file " + path);
  }
  if (::fsync(fd) != 0) throw_errno("cannot sync state file " + path);
  result.wrote = true;
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  std::string machine;  // named by the error messages
  try {
    CLI::App app{"A batch job that at most N machines run at once, with a fenced write.",
                 "fairsem-migration-job"};
    std::string url;
    std::string name = "migration";
    std::string state = "migration.state";
    long long limit = 2;
    long long wait_seconds = 30;
    app.add_option("--machine", machine, "This machine's name (its permit id is migration-NAME)")
        ->required();
    args::add_url(app, url);
    app.add_option("--name", name, "Semaphore name")->capture_default_str();
    app.add_option("--limit", limit, "Machines at once")
        ->capture_default_str()
        ->transform(args::whole_number(1, fairsem::kMaxLimit));
    app.add_option("--wait", wait_seconds, "Seconds to wait for a permit")
        ->capture_default_str()
        ->transform(args::whole_number(0, 86400));
    app.add_option("--state", state, "The fenced state file")->capture_default_str();
    if (const auto exit_code = args::parse(app, argc, argv, kUsage)) return *exit_code;
    url = args::resolve_url(url);
    if (machine.empty()) return usage("--machine is required");
    if (state.empty()) return usage("--state needs a file name");

    fairsem::SemaphoreOptions options;
    options.limit = limit;
    options.permit_id = "migration-" + machine;  // one permit per machine, also after a restart
    options.owner_info = "migration job on " + machine;
    fairsem::FairSemaphore sem(fairsem::ConnectionOptions::from_url(url), name, options);

    std::optional<fairsem::Permit> permit = sem.try_acquire_for(std::chrono::seconds(wait_seconds));
    if (!permit) {
      fmt::print(stderr,
                 "fairsem-migration-job: machine {}: no permit of semaphore '{}' within {} s: "
                 "{} other machine(s) run the migration already\n",
                 machine, name, wait_seconds, limit);
      fmt::print("machine={} token=none wrote=no\n", machine);
      return kExitTempFail;
    }
    const long long token = permit->fencing_token();
    fmt::print("machine={} token={} permit={} granted\n", machine, token, permit->id());
    // Seen before the write starts; a stdout that is gone ends the job before it writes.
    if (std::fflush(stdout) != 0) {
      throw std::system_error(errno, std::generic_category(), "writing to stdout");
    }

    // The migration itself would run here: read a batch from the old database, insert it into
    // the new one (duplicates from a machine that ran the same batch are ignored), and finally
    // record the progress through the fenced write below.
    const WriteResult result = fenced_write(state, token, machine);
    permit->release();
    if (!result.wrote) {
      fmt::print(stderr,
                 "fairsem-migration-job: machine {}: refused: token {} is older than stored {} "
                 "(written by machine {}) in {}\n",
                 machine, token, result.stored_token, result.stored_machine, state);
      fmt::print("machine={} token={} wrote=no\n", machine, token);
      return kExitTempFail;
    }
    fmt::print("machine={} token={} wrote=yes\n", machine, token);
    return 0;
  } catch (const fairsem::InvalidArgument& e) {
    return usage(e.what());
  } catch (const fairsem::ConnectionError& e) {
    fmt::print(stderr, "fairsem-migration-job: machine {}: {}\n", machine, e.what());
    return kExitUnavailable;
  } catch (const std::exception& e) {
    fmt::print(stderr, "fairsem-migration-job: machine {}: {}\n", machine, e.what());
    return kExitInternal;
  }
}
