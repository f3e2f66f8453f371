// `fairsem status --watch`: the status, read again every interval until SIGINT, SIGTERM or
// SIGHUP.
//
// Signals: INT, TERM, HUP and USR1 are blocked before any thread starts. Each read runs on a
// thread of its own, which raises SIGUSR1 when it is done; the main thread takes signals with
// sigwaitinfo() while a read runs and with sigtimedwait() between reads, so a signal ends the
// wait at once, even while Redis does not answer. On a terminal each frame replaces the last
// one in place; otherwise frames follow each other, each after a header line with the time.

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <signal.h>  // NOLINT(modernize-deprecated-headers): POSIX sigset_t, sigwaitinfo
#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "commands.hpp"
#include "common.hpp"
#include "status_view.hpp"

namespace fairsem::cli {

namespace {

constexpr const char* kCommand = "fairsem status";

/// "2025-05-01T12:34:56.123+02:00": local time, with its offset so that logs from machines in
/// other time zones compare.
std::string timestamp(std::chrono::system_clock::time_point t) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(t);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()) %
                  std::chrono::seconds(1);
  std::tm local{};
  localtime_r(&seconds, &local);
  const long offset_minutes = local.tm_gmtoff / 60;
  const long abs_minutes = offset_minutes < 0 ? -offset_minutes : offset_minutes;
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03}{}{:02}:{:02}", local, ms.count(),
                     offset_minutes < 0 ? '-' : '+', abs_minutes / 60, abs_minutes % 60);
}

/// "1s", "2s", "250ms", "1500ms": the interval as the header shows it.
std::string interval_text(std::chrono::milliseconds interval) {
  if (interval.count() % 1000 == 0) return fmt::format("{}s", interval.count() / 1000);
  return fmt::format("{}ms", interval.count());
}

/// Writes all of `text` to stdout now; throws std::system_error when stdout is gone.
void write_out(const std::string& text) {
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
    throw std::system_error(errno, std::generic_category(), "writing to stdout");
  }
}

/// The terminal's size, or 0 x 0 when unknown.
struct Size {
  std::size_t rows = 0;
  std::size_t columns = 0;
};

Size terminal_size() {
  winsize ws{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0) return {};
  return {ws.ws_row, ws.ws_col};
}

/// `line` cut to `columns` characters (UTF-8 aware: continuation bytes take no column), so
/// that no line wraps: one line of the frame is one line of the screen.
std::string fit(const std::string& line, std::size_t columns) {
  if (columns == 0) return line;
  std::size_t used = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const auto c = static_cast<unsigned char>(line[i]);
    if ((c & 0xC0) == 0x80) continue;
    if (used == columns) return line.substr(0, i);
    ++used;
  }
  return line;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t nl = text.find('\n', start);
    if (nl == std::string::npos) {
      lines.push_back(text.substr(start));
      break;
    }
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

/// Where the frames go: a terminal (redrawn in place), a file or pipe (one after the other),
/// or NDJSON (one object per line, terminal or not).
class Screen {
 public:
  Screen(const StatusArgs& args, bool tty, std::chrono::milliseconds interval)
      : args_(args), tty_(tty && !args.json), interval_(interval_text(interval)) {}

  void show(const Status& s, std::chrono::system_clock::time_point at) {
    if (args_.json) {
      nlohmann::ordered_json j;
      j["time"] = timestamp(at);
      const nlohmann::ordered_json fields = status_json(args_.target, s);
      for (const auto& [key, value] : fields.items()) j[key] = value;
      write_out(json_line(j) + "\n");
      return;
    }
    draw(at, status_table(args_.target, s));
  }

  void show_error(const std::string& message, std::chrono::system_clock::time_point at,
                  std::optional<std::chrono::system_clock::time_point> last_read) {
    if (args_.json) {
      nlohmann::ordered_json j;
      j["time"] = timestamp(at);
      j["name"] = args_.target.name;
      j["error"] = message;
      write_out(json_line(j) + "\n");
      return;
    }
    draw(at, fmt::format("semaphore '{}' (prefix '{}'): cannot read it: {}\n"
                         "last read at {}; trying again every {}\n",
                         args_.target.name, args_.target.key_prefix, message,
                         last_read ? timestamp(*last_read) : "never", interval_));
  }

  /// Shows the cursor again if it was hidden. Best effort, never throws: stdout may be gone,
  /// and then there is nothing to show it on.
  void finish() noexcept {
    if (cursor_hidden_) {
      constexpr std::string_view kShow = "\033[?25h";
      (void)std::fwrite(kShow.data(), 1, kShow.size(), stdout);
      cursor_hidden_ = false;
    }
    (void)std::fflush(stdout);
  }

 private:
  void draw(std::chrono::system_clock::time_point at, const std::string& body) {
    if (!tty_) {
      write_out(fmt::format("--- {} ---\n{}", timestamp(at), body));
      return;
    }
    std::vector<std::string> lines = {
        fmt::format("every {}, {}  (Ctrl-C to stop)", interval_, timestamp(at)), ""};
    for (std::string& line : split_lines(body)) lines.push_back(std::move(line));
    const Size size = terminal_size();
    // The frame must fit the screen: a frame taller than it would scroll, and the top of the
    // screen would no longer be where it starts.
    if (size.rows > 1 && lines.size() > size.rows - 1) {
      const std::size_t shown = size.rows - 2;
      const std::size_t hidden = lines.size() - shown;
      lines.resize(shown);
      lines.push_back(fmt::format("... {} more lines (see `fairsem status`)", hidden));
    }
    std::string out;
    if (!cursor_hidden_) {
      out += "\033[?25l\033[H\033[2J";  // hide the cursor, clear the screen once
      cursor_hidden_ = true;
    }
    // From the top left, each line over the old one (cut so that none wraps), then whatever
    // is below cleared. Drawn from a fixed place rather than moved up by the previous frame's
    // height, so that a line someone else wrote meanwhile (a warning on stderr) is simply
    // drawn over.
    // The last column stays empty: a line that fills it leaves the cursor there, waiting to
    // wrap, and "erase to the end of the line" would then erase its last character.
    const std::size_t width = size.columns > 1 ? size.columns - 1 : size.columns;
    out += "\033[H";
    for (const std::string& line : lines) out += fit(line, width) + "\033[K\n";
    out += "\033[J";
    write_out(out);
  }

  const StatusArgs& args_;
  const bool tty_;
  const std::string interval_;
  bool cursor_hidden_ = false;
};

/// What one read of the status found.
struct Read {
  std::optional<Status> status;
  std::exception_ptr error;
  std::atomic<bool> done{false};
};

/// Reads the status on a thread of its own while this thread takes signals. Returns false if
/// a stop signal came first: the read is then left behind, as it may hang on an unresponsive
/// Redis for its timeouts.
bool read_status(std::optional<SemaphoreAdmin>& admin, const ConnectionOptions& connection,
                 const Target& target, const sigset_t& stop_or_done, Read& read) {
  std::thread reader([&] {
    try {
      if (!admin) admin.emplace(connection, target.name, target.key_prefix);
      read.status = admin->status();
    } catch (...) {
      read.error = std::current_exception();
    }
    read.done.store(true);
    kill(getpid(), SIGUSR1);
  });
  while (!read.done.load()) {
    siginfo_t info;
    const int sig = sigwaitinfo(&stop_or_done, &info);
    if (sig > 0 && sig != SIGUSR1) {
      reader.detach();
      return false;
    }
  }
  reader.join();
  return true;
}

/// Waits until `until`; false if a stop signal came first.
bool wait_until_or_signal(std::chrono::steady_clock::time_point until, const sigset_t& stop) {
  for (;;) {
    const auto left = until - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return true;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    const timespec timeout{static_cast<std::time_t>(ns / 1'000'000'000),
                           static_cast<long>(ns % 1'000'000'000)};
    if (sigtimedwait(&stop, nullptr, &timeout) > 0) return false;
    if (errno == EAGAIN) return true;  // EINTR (e.g. after SIGSTOP and SIGCONT): wait on
  }
}

}  // namespace

int watch_main(const StatusArgs& args) {
  const sigset_t stop = stop_signals();
  sigset_t stop_or_done = stop;
  sigaddset(&stop_or_done, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &stop_or_done, nullptr);  // before any thread starts

  Screen screen(args, stdout_is_tty(), *args.watch);
  try {
    ConnectionOptions connection = ConnectionOptions::from_url(args.target.url);
    // One connection attempt per refresh: the next refresh is the retry, and an error shows
    // within one interval instead of after the reconnect back-off.
    connection.reconnect_attempts = 1;
    std::optional<SemaphoreAdmin> admin;  // touched only by the reading thread while it runs
    std::optional<std::chrono::system_clock::time_point> last_read;
    for (bool first = true;; first = false) {
      const auto started = std::chrono::steady_clock::now();
      Read read;
      if (!read_status(admin, connection, args.target, stop_or_done, read)) {
        screen.finish();
        std::_Exit(0);  // not waiting for the read left behind
      }
      const auto now = std::chrono::system_clock::now();
      if (!read.error) {
        last_read = now;
        screen.show(*read.status, now);
      } else if (first) {
        // A mistake in the URL, the credentials or the name shows at once, as without
        // --watch; after a good read, Redis trouble is shown and the watch goes on.
        std::rethrow_exception(read.error);
      } else {
        try {
          std::rethrow_exception(read.error);
        } catch (const Error& e) {
          admin.reset();  // the next refresh connects afresh (a failover may have moved it)
          screen.show_error(std::string(without_prefix(e.what())), now, last_read);
        }
      }
      if (!wait_until_or_signal(started + *args.watch, stop)) {
        screen.finish();
        return 0;
      }
    }
  } catch (...) {
    screen.finish();
    return report_exception(kCommand);
  }
}

}  // namespace fairsem::cli
