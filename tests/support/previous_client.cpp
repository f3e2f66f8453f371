#include "previous_client.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "fairsem/impl/protocol/scripts.hpp"

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
/// prefix of the receipt keys: one per release up to 0.3.x (`released:ID`), buckets from 0.4.0
/// on (`receipts:E`).
std::vector<std::string> previous_keys(const std::string& version, const std::string& prefix,
                                       const std::string& name) {
  const std::string base = prefix + ":{" + name + "}:";
  const bool buckets = version != "0.2.0" && version.rfind("0.3.", 0) != 0;
  std::vector<std::string> keys;
  for (const char* k : {"owner", "time", "counter", "meta", "info",
                        "wake:", buckets ? "receipts:" : "released:", "slots", "free"}) {
    keys.push_back(base + k);
  }
  return keys;
}

}  // namespace

PreviousClient::PreviousClient(const std::string& version, const ConnectionOptions& options,
                               const std::string& key_prefix, const std::string& name,
                               long long limit, std::chrono::milliseconds lease)
    : version_(version),
      keys_(previous_keys(version, key_prefix, name)),
      limit_(std::to_string(limit)),
      lease_(std::to_string(lease.count())),
      conn_(options),
      waker_(options) {
  const std::string shared =
      read_part(version, "common") + read_part(version, "slots") + read_part(version, "queue");
  acquire_ = load("acquire", shared + read_part(version, "acquire"));
  release_ = load("release", shared + read_part(version, "release"));
  if (version != "0.2.0") renew_ = load("renew", shared + read_part(version, "renew"));
}

PreviousClient::Loaded PreviousClient::load(const std::string& name, const std::string& body) {
  Loaded s{"previous_" + name, body, {}};
  s.sha1 = conn_.command(detail::Args{"SCRIPT", "LOAD", s.body}).str;
  return s;
}

detail::Reply PreviousClient::acquire(const std::string& id, const std::string& mode,
                                      long long ticket, long long units,
                                      const std::string& client) {
  std::vector<std::string> args{id, mode, "v" + version_, std::to_string(ticket),
                                std::to_string(units)};
  if (!client.empty()) args.push_back(client);
  return eval(acquire_, "acquire", args);
}

detail::Reply PreviousClient::release(const std::string& id, long long ticket,
                                      const std::vector<std::string>& extra) {
  std::vector<std::string> args{id, std::to_string(ticket), std::to_string(kReceipt.count())};
  args.insert(args.end(), extra.begin(), extra.end());
  return eval(release_, "release", args);
}

detail::Reply PreviousClient::renew(const std::string& id, long long ticket) {
  if (renew_.body.empty()) throw std::logic_error(version_ + " renews through acquire");
  return eval(renew_, "renew", {id, std::to_string(ticket)});
}

detail::Reply PreviousClient::wait_for_wake_up(const std::string& id,
                                               std::chrono::milliseconds timeout) {
  return brpop(keys_[5] + id, timeout);
}

detail::Reply PreviousClient::wait_on_inbox(const std::string& client,
                                            std::chrono::milliseconds timeout) {
  return brpop(keys_[5] + "{inbox}" + client, timeout);
}

detail::Reply PreviousClient::brpop(const std::string& key, std::chrono::milliseconds timeout) {
  const std::string seconds = std::to_string(static_cast<double>(timeout.count()) / 1000.0);
  return waker_.command(detail::Args{"BRPOP", key, seconds},
                        timeout + std::chrono::milliseconds(2000));
}

detail::Reply PreviousClient::eval(const Loaded& script, const std::string& operation,
                                   const std::vector<std::string>& args) {
  const detail::Script s{script.name, script.body, script.sha1, nullptr, {}};
  detail::Args argv{operation, limit_, lease_};
  for (const std::string& a : args) argv.emplace_back(a);
  return conn_.eval(s, detail::Args(keys_.begin(), keys_.end()), argv);
}

}  // namespace fairsem::test
