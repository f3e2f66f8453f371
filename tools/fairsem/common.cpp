#include "common.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>

namespace fairsem::cli {

std::chrono::milliseconds parse_duration(std::string_view text, std::string_view what) {
  const auto bad = [&](std::string_view why) {
    // A URL typed where a duration goes is quoted without its credentials.
    const std::string shown =
        text.find("://") == std::string_view::npos ? std::string(text) : fairsem::redact_url(text);
    return InvalidArgument(
        fmt::format("{} \"{}\" is not a duration ({}); use e.g. 250ms, 10s, 2m, 1h or bare seconds",
                    what, shown, why));
  };
  std::size_t digits_end = 0;
  bool seen_digit = false;
  bool seen_point = false;
  for (; digits_end < text.size(); ++digits_end) {
    const char c = text[digits_end];
    if (c >= '0' && c <= '9') {
      seen_digit = true;
    } else if (c == '.' && !seen_point) {
      seen_point = true;
    } else {
      break;
    }
  }
  if (text.empty()) throw bad("it is empty");
  if (text[0] == '-') throw bad("it is negative");
  if (!seen_digit) throw bad("it does not start with a number");
  const std::string_view unit = text.substr(digits_end);
  double unit_ms = 0;
  if (unit.empty() || unit == "s") {
    unit_ms = 1000;
  } else if (unit == "ms") {
    unit_ms = 1;
  } else if (unit == "m") {
    unit_ms = 60'000;
  } else if (unit == "h") {
    unit_ms = 3'600'000;
  } else {
    throw bad(fmt::format("unknown unit \"{}\"", unit));
  }
  const std::string number(text.substr(0, digits_end));
  const double value = std::strtod(number.c_str(), nullptr) * unit_ms;
  // A year is far beyond any sensible lease or wait, and keeps the arithmetic exact.
  if (!(value <= 365.0 * 24 * 3'600'000)) throw bad("it is longer than a year");
  const double rounded = std::round(value);
  if (std::fabs(rounded - value) > 1e-6) throw bad("it is not a whole number of milliseconds");
  return std::chrono::milliseconds(static_cast<long long>(rounded));
}

std::string format_duration(std::chrono::milliseconds d) {
  const long long ms = d.count();
  if (ms < 1000) return fmt::format("{}ms", ms);
  if (ms < 60'000) return fmt::format("{}.{:03}s", ms / 1000, ms % 1000);
  return fmt::format("{}m{:02}s", ms / 60'000, (ms / 1000) % 60);
}

int usage_error(std::string_view command, std::string_view message) {
  fmt::print(stderr, "{}: {}\nRun '{} --help' for usage.\n", command, message, command);
  return kExitUsage;
}

std::string_view without_prefix(std::string_view message) {
  constexpr std::string_view kPrefix = "fairsem: ";
  if (message.substr(0, kPrefix.size()) == kPrefix) message.remove_prefix(kPrefix.size());
  return message;
}

int report_exception(std::string_view command) {
  try {
    throw;
  } catch (const InvalidArgument& e) {
    return usage_error(command, without_prefix(e.what()));
  } catch (const LimitMismatchError& e) {
    fmt::print(stderr, "{}: {}\n", command, without_prefix(e.what()));
    return kExitUsage;
  } catch (const EvictedError& e) {
    fmt::print(stderr, "{}: {}\n", command, without_prefix(e.what()));
    return kExitTempFail;
  } catch (const QueueFullError& e) {
    fmt::print(stderr, "{}: {}\n", command, without_prefix(e.what()));
    return kExitTempFail;
  } catch (const ConnectionError& e) {
    fmt::print(stderr, "{}: {}\n", command, without_prefix(e.what()));
    return kExitUnavailable;
  } catch (const ReplyError& e) {
    fmt::print(stderr, "{}: {}\n", command, without_prefix(e.what()));
    // An ACL user without the commands or keys fairsem needs: like a refused login.
    return e.server_message().rfind("NOPERM", 0) == 0 ? kExitUnavailable : kExitInternal;
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: internal error: {}\n", command, without_prefix(e.what()));
    return kExitInternal;
  } catch (...) {
    fmt::print(stderr, "{}: internal error (unknown exception)\n", command);
    return kExitInternal;
  }
}

bool stdout_is_tty() { return isatty(STDOUT_FILENO) == 1; }

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction current {};
    if (sigaction(sig, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) continue;
    sigaddset(&set, sig);
  }
  return set;
}

}  // namespace fairsem::cli
