#include "args.hpp"

#include <fmt/format.h>
#include <fairsem/fairsem.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace fairsem::args {

std::string resolve_url(const std::string& given) {
  if (!given.empty()) return given;
  for (const char* name : {"FAIRSEM_URL", "REDIS_URL"}) {
    // getenv races only with setenv/putenv, which nothing in these programs calls.
    const char* value = std::getenv(name);  // NOLINT(concurrency-mt-unsafe)
    if (value != nullptr && *value != '\0') return value;
  }
  return "redis://127.0.0.1:6379";
}

CLI::Option* add_url(CLI::App& app, std::string& url, const std::string& name) {
  return app.add_option(
      name, url, "Redis URL (default: $FAIRSEM_URL, else $REDIS_URL, else redis://127.0.0.1:6379)");
}

CLI::Validator whole_number(long long min, long long max) {
  const std::string what = fmt::format("a whole number from {} to {}", min, max);
  return {[min, max, what](std::string& text) -> std::string {
            const bool digits =
                !text.empty() && text.size() <= 18 &&
                std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
            const long long value = digits ? std::stoll(text) : 0;
            if (!digits || value < min || value > max) {
              return fmt::format("\"{}\" is not {}", text, what);
            }
            // Decimal: CLI11 would read "010" as octal.
            text = std::to_string(value);
            return {};
          },
          fmt::format("{}..{}", min, max)};
}

CLI::Validator tenant_name() {
  return {[](std::string& text) -> std::string {
            try {
              fairsem::validate_tenant(text);
            } catch (const fairsem::InvalidArgument&) {
              if (text.size() > fairsem::kMaxTenantLength) {
                return fmt::format("\"{}\" is not a tenant: it is {} bytes long, at most {}",
                                   fairsem::printable(text), text.size(),
                                   fairsem::kMaxTenantLength);
              }
              return fmt::format("\"{}\" is not a tenant: it has a control byte",
                                 fairsem::printable(text));
            }
            return {};
          },
          "TENANT"};
}

std::string hide_credentials(std::string message, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    // "--url=URL" may be quoted whole or as its value alone.
    const std::size_t eq = arg.find('=');
    for (std::string_view url :
         {arg, eq == std::string_view::npos ? std::string_view{} : arg.substr(eq + 1)}) {
      if (url.find("://") == std::string_view::npos) continue;
      const std::string redacted = fairsem::redact_url(url);
      for (std::size_t at = message.find(url); at != std::string::npos;
           at = message.find(url, at + redacted.size())) {
        message.replace(at, url.size(), redacted);
      }
    }
  }
  return message;
}

std::optional<int> parse(CLI::App& app, int argc, char** argv, std::string_view usage) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    fmt::print(stderr, "{}: {}\n{}", app.get_name(), hide_credentials(e.what(), argc, argv), usage);
    return kExitUsage;
  }
  return std::nullopt;
}

}  // namespace fairsem::args
