#include "previous_client.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace fairsem::test {
namespace {

std::string read_part(const std::string& version, const std::string& name) {
  const std::string path =
      std::string(FAIRSEM_PREVIOUS_RELEASE_DIR) + "/" + version + "/" + name + ".lua";
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in || text.str().empty()) throw std::runtime_error("missing script " + path);
  return text.str();
}

/// The release's key list: the nine keys of every release since 0.2.0, whose seventh is the
/// prefix of the per-release receipt keys.
std::vector<std::string> previous_keys(const std::string& prefix, const std::string& name) {
  const std::string base = prefix + ":{" + name + "}:";
  std::vector<std::string> keys;
  for (const char* k :
       {"owner", "time", "counter", "meta", "info", "wake:", "released:", "slots", "free"}) {
    keys.push_back(base + k);
  }
  return keys;
}

}  // namespace

PreviousClient::PreviousClient(const std::string& version, const ConnectionOptions& options,
                               const std::string& key_prefix, const std::string& name,
                               long long limit, std::chrono::milliseconds lease)
    : version_(version),
      keys_(previous_keys(key_prefix, name)),
      limit_(std::to_string(limit)),
      lease_(std::to_string(lease.count())),
      conn_(options),
      waker_(options) {
  const std::string shared =
      read_part(version, "common") + read_part(version, "slots") + read_part(version, "queue");
  acquire_ = shared + read_part(version, "acquire");
  release_ = shared + read_part(version, "release");
  if (version != "0.2.0") renew_ = shared + read_part(version, "renew");
}

detail::Reply PreviousClient::acquire(const std::string& id, const std::string& mode,
                                      long long ticket, long long units) {
  return eval(acquire_, "acquire",
              {id, mode, "v" + version_, std::to_string(ticket), std::to_string(units)});
}

detail::Reply PreviousClient::release(const std::string& id, long long ticket,
                                      const std::vector<std::string>& extra) {
  std::vector<std::string> args{id, std::to_string(ticket), std::to_string(kReceipt.count())};
  args.insert(args.end(), extra.begin(), extra.end());
  return eval(release_, "release", args);
}

detail::Reply PreviousClient::renew(const std::string& id, long long ticket) {
  if (renew_.empty()) throw std::logic_error(version_ + " renews through acquire");
  return eval(renew_, "renew", {id, std::to_string(ticket)});
}

detail::Reply PreviousClient::wait_for_wake_up(const std::string& id,
                                               std::chrono::milliseconds timeout) {
  const std::string seconds = std::to_string(static_cast<double>(timeout.count()) / 1000.0);
  return waker_.command(detail::Args{"BRPOP", keys_[5] + id, seconds},
                        timeout + std::chrono::milliseconds(2000));
}

detail::Reply PreviousClient::eval(const std::string& script, const std::string& operation,
                                   const std::vector<std::string>& args) {
  const std::string key_count = std::to_string(keys_.size());  // outlives argv's views
  detail::Args argv{"EVAL", script, key_count};
  for (const std::string& k : keys_) argv.emplace_back(k);
  argv.emplace_back(operation);
  argv.emplace_back(limit_);
  argv.emplace_back(lease_);
  for (const std::string& a : args) argv.emplace_back(a);
  return conn_.command(argv);
}

}  // namespace fairsem::test
