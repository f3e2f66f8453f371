#pragma once

// Child processes for tests: a program run with pipes for stdin and stdout, its stderr kept,
// signalled, waited for, and reaped (and checked for sanitizer reports) when it goes.

#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "wait.hpp"

extern char** environ;

namespace fairsem::test {

/// "exited with status 3", "killed by signal Terminated", for failure messages.
inline std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + strsignal(WTERMSIG(status));
  return "wait status " + std::to_string(status);
}

/// The stacks of every thread of process `pid` (gdb's backtraces), for the message of a test
/// whose child hung: where it waits. Says so when gdb is missing or cannot attach.
inline std::string stacks_of(pid_t pid) {
  const std::string command =
      "timeout 60 gdb -nx -batch -p " + std::to_string(pid) + " -ex 'thread apply all bt' 2>&1";
  std::string out;
  if (FILE* p = ::popen(command.c_str(), "r")) {
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    const int status = ::pclose(p);
    if (status != 0) out += "(gdb " + describe_wait_status(status) + ")\n";
  } else {
    out = std::string("(could not run gdb: ") + std::strerror(errno) + ")\n";
  }
  return "stacks of process " + std::to_string(pid) + ":\n" + out;
}

/// A child process started with execve: its stdin and stdout are pipes to this process, its
/// stderr goes to an unlinked temp file. The destructor SIGKILLs the child if it is still
/// running, reaps it, copies its stderr to ours, and fails the test if a sanitizer reported
/// anything (also from a child that was killed and so never got to exit with the sanitizer's
/// status).
class ChildProcess {
 public:
  using Clock = std::chrono::steady_clock;
  // Hang detectors, not speed requirements: sanitizer builds on a loaded machine are slow.
  static constexpr auto kTimeout = std::chrono::seconds(30);

  /// argv[0] is the program's path (no PATH search).
  explicit ChildProcess(const std::vector<std::string>& argv,
                        const std::map<std::string, std::string>& env_overrides = {}) {
    // Everything the child needs is built before fork(): after it, only async-signal-safe calls.
    std::vector<std::string> argv_strings = argv;
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e;
      const std::string key = entry.substr(0, entry.find('='));
      if (env_overrides.count(key) == 0) env_strings.push_back(entry);
    }
    for (const auto& [key, value] : env_overrides) env_strings.push_back(key + "=" + value);
    std::vector<char*> argv_ptrs;
    for (std::string& s : argv_strings) argv_ptrs.push_back(s.data());
    argv_ptrs.push_back(nullptr);
    std::vector<char*> env_ptrs;
    for (std::string& s : env_strings) env_ptrs.push_back(s.data());
    env_ptrs.push_back(nullptr);

    char err_path[] = "/tmp/fairsem-worker-stderr-XXXXXX";
    stderr_fd_ = ::mkostemp(err_path, O_CLOEXEC);
    if (stderr_fd_ < 0) throw_errno("mkostemp");
    ::unlink(err_path);
    int to_child[2];
    int from_child[2];
    // O_CLOEXEC: no other worker inherits these ends (a stray write end would keep a worker
    // from ever seeing EOF on its stdin).
    if (::pipe2(to_child, O_CLOEXEC) != 0) {
      const int saved = errno;
      ::close(stderr_fd_);
      errno = saved;
      throw_errno("pipe2");
    }
    if (::pipe2(from_child, O_CLOEXEC) != 0) {
      const int saved = errno;
      for (int fd : {to_child[0], to_child[1], stderr_fd_}) ::close(fd);
      errno = saved;
      throw_errno("pipe2");
    }
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
      const int saved = errno;
      for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) ::close(fd);
      ::close(stderr_fd_);
      errno = saved;
      throw_errno("fork");
    }
    if (pid == 0) {
      // Dies with the test (the forking thread is the test's main thread).
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(126);
      if (::dup2(to_child[0], STDIN_FILENO) < 0 || ::dup2(from_child[1], STDOUT_FILENO) < 0 ||
          ::dup2(stderr_fd_, STDERR_FILENO) < 0) {
        ::_exit(126);
      }
#ifdef SYS_close_range
      // Redis sockets of this process need not live on in the worker.
      ::syscall(SYS_close_range, 3u, ~0u, 0u);
#endif
      ::execve(argv_ptrs[0], argv_ptrs.data(), env_ptrs.data());
      static const char kMsg[] = "fairsem test: execve of a child process failed\n";
      [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
      ::_exit(127);
    }
    pid_ = pid;
    ::close(to_child[0]);
    ::close(from_child[1]);
    stdin_fd_ = to_child[1];
    stdout_fd_ = from_child[0];
  }

  ~ChildProcess() {
    close_stdin();
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
    }
    if (stdout_fd_ >= 0) ::close(stdout_fd_);
    const std::string err = stderr_text();
    if (stderr_fd_ >= 0) ::close(stderr_fd_);
    if (!err.empty()) {
      std::fprintf(stderr, "--- stderr of process %ld ---\n%s--- end of process %ld ---\n",
                   static_cast<long>(pid_), err.c_str(), static_cast<long>(pid_));
    }
    if (err.find("Sanitizer") != std::string::npos ||
        err.find("runtime error:") != std::string::npos) {
      ADD_FAILURE() << "a sanitizer reported an error in process " << pid_ << ":\n" << err;
    }
  }

  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const noexcept { return pid_; }

  /// The next line the worker printed (without '\n'); nullopt at EOF or after `timeout`.
  std::optional<std::string> read_line(Clock::duration timeout = kTimeout) {
    const auto end = Clock::now() + timeout;
    for (;;) {
      const std::size_t nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        transcript_ += line + "\n";
        return line;
      }
      if (eof_) return std::nullopt;
      const auto left = end - Clock::now();
      if (left <= Clock::duration::zero()) return std::nullopt;
      pollfd pfd{stdout_fd_, POLLIN, 0};
      const int ready =
          ::poll(&pfd, 1,
                 static_cast<int>(std::max<long long>(
                     1, std::chrono::duration_cast<std::chrono::milliseconds>(left).count() + 1)));
      if (ready < 0) {
        if (errno == EINTR) continue;
        throw_errno("poll");
      }
      if (ready == 0) continue;
      char chunk[4096];
      const ssize_t n = ::read(stdout_fd_, chunk, sizeof chunk);
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        throw_errno("read");
      }
      if (n == 0) {
        eof_ = true;
      } else {
        buffer_.append(chunk, static_cast<std::size_t>(n));
      }
    }
  }

  /// Reads lines until one starts with `prefix` and returns it; nullopt at EOF or timeout.
  std::optional<std::string> expect(std::string_view prefix, Clock::duration timeout = kTimeout) {
    const auto end = Clock::now() + timeout;
    for (;;) {
      auto line = read_line(std::max(Clock::duration::zero(), end - Clock::now()));
      if (!line) return std::nullopt;
      if (line->compare(0, prefix.size(), prefix) == 0) return line;
    }
  }

  /// Everything the process prints from now until it closes its stdout (or `timeout` passes).
  std::string read_to_eof(Clock::duration timeout = kTimeout) {
    const auto end = Clock::now() + timeout;
    std::string text;
    while (auto line = read_line(std::max(Clock::duration::zero(), end - Clock::now()))) {
      text += *line + "\n";
    }
    text += buffer_;  // a last line without '\n'
    transcript_ += buffer_;
    buffer_.clear();
    return text;
  }

  /// Every line read so far, for failure messages.
  std::string transcript() const {
    return "process " + std::to_string(pid_) + " printed:\n" + transcript_ + buffer_ +
           "its stderr so far:\n" + stderr_text();
  }

  /// Everything the worker wrote to stderr so far.
  std::string stderr_text() const {
    std::string text;
    if (stderr_fd_ < 0) return text;
    char chunk[4096];
    for (;;) {
      const ssize_t n = ::pread(stderr_fd_, chunk, sizeof chunk, static_cast<off_t>(text.size()));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return text;
      text.append(chunk, static_cast<std::size_t>(n));
    }
  }

  /// Writes `text` to the worker's stdin.
  void write_stdin(const std::string& text) {
    std::size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::write(stdin_fd_, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw_errno("write to the worker's stdin");
      done += static_cast<std::size_t>(n);
    }
  }

  /// EOF on the worker's stdin: a holding worker then releases and exits.
  void close_stdin() {
    if (stdin_fd_ >= 0) ::close(stdin_fd_);
    stdin_fd_ = -1;
  }

  void signal(int sig) {
    if (pid_ <= 0 || reaped_) throw std::logic_error("signal to a process that is gone");
    if (::kill(pid_, sig) != 0) throw_errno("kill");
  }

  /// Waits (without reaping) until the worker is stopped, e.g. after SIGSTOP.
  bool wait_stopped() {
    int status = 0;
    for (;;) {
      const pid_t r = ::waitpid(pid_, &status, WUNTRACED);
      if (r < 0 && errno == EINTR) continue;
      if (r != pid_) return false;
      if (WIFSTOPPED(status)) return true;
      reaped_ = true;  // it exited instead
      exit_status_ = status;
      return false;
    }
  }

  /// SIGKILL, then reaps: when this returns the process is gone.
  void kill_and_reap() {
    signal(SIGKILL);
    exit_status_ = reap_blocking();
  }

  /// The worker's wait status once it has exited (polled), or nullopt after `timeout`.
  std::optional<int> wait_exit(Clock::duration timeout = kTimeout) {
    if (reaped_) return exit_status_;
    const bool exited = wait_until(
        [&] {
          int status = 0;
          const pid_t r = ::waitpid(pid_, &status, WNOHANG);
          if (r == pid_ && (WIFEXITED(status) || WIFSIGNALED(status))) {
            reaped_ = true;
            exit_status_ = status;
          }
          return reaped_;
        },
        timeout);
    if (!exited) return std::nullopt;
    return exit_status_;
  }

 private:
  [[noreturn]] static void throw_errno(const char* what) {
    throw std::runtime_error(std::string("fairsem test child: ") + what + ": " +
                             std::strerror(errno));
  }

  int reap_blocking() {
    int status = 0;
    for (;;) {
      const pid_t r = ::waitpid(pid_, &status, 0);
      if (r == pid_ && (WIFEXITED(status) || WIFSIGNALED(status))) break;
      if (r < 0 && errno != EINTR) throw_errno("waitpid");
    }
    reaped_ = true;
    return status;
  }

  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  int stderr_fd_ = -1;
  bool eof_ = false;
  bool reaped_ = false;
  int exit_status_ = 0;
  std::string buffer_;
  std::string transcript_;
};

}  // namespace fairsem::test
