#pragma once

// The TLS unit (tls.hpp): OpenSSL client settings and the verified handshake. hiredis_ssl
// only carries the bytes: fairsem makes the SSL object itself so that it can ask OpenSSL to
// check the server's name, which hiredis's own helper does not do.

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/net/tls.hpp"

#include <fmt/format.h>

#include "fairsem/errors.hpp"
#include "fairsem/impl/text.hpp"

#if FAIRSEM_WITH_TLS
#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <hiredis/hiredis_ssl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <mutex>
#include <system_error>
#include <tuple>
#endif

namespace fairsem {

FAIRSEM_INLINE bool tls_supported() noexcept { return FAIRSEM_WITH_TLS != 0; }

}  // namespace fairsem

namespace fairsem::detail {

#if !FAIRSEM_WITH_TLS

class TlsConfig {};

FAIRSEM_INLINE std::shared_ptr<const TlsConfig> tls_config(const TlsOptions& /*tls*/) {
  throw InvalidArgument(fmt::format("fairsem: {}", kTlsNotBuiltIn));
}

FAIRSEM_INLINE void start_tls(redisContext& /*ctx*/, const TlsConfig& /*config*/,
                              const TlsOptions& /*tls*/, const std::string& /*host*/,
                              const std::string& /*endpoint*/,
                              std::chrono::milliseconds /*timeout*/) {
  throw InvalidArgument(fmt::format("fairsem: {}", kTlsNotBuiltIn));
}

FAIRSEM_INLINE std::string take_tls_error(const redisContext& /*ctx*/) { return {}; }

#else

namespace tls_helpers {

/// OpenSSL's reason for the last error queued on this thread ("" when none); clears them all.
FAIRSEM_INLINE std::string take_reason() {
  const auto code = ERR_peek_last_error();
  std::string reason;
  if (code != 0) {
    const char* text = ERR_reason_error_string(code);
    reason = text != nullptr ? std::string(text) : fmt::format("OpenSSL error {:#x}", code);
  }
  ERR_clear_error();
  return reason;
}

[[noreturn]] FAIRSEM_INLINE void refuse(std::string_view option, const std::string& path,
                                        std::string_view why) {
  throw InvalidArgument(
      fmt::format("fairsem: invalid TLS options: {} '{}' {}", option, printable(path), why));
}

/// Refuses `path` unless it names something readable of the kind wanted, so that a typo is
/// reported as such rather than as an OpenSSL parse error.
FAIRSEM_INLINE void check_readable(std::string_view option, const std::string& path,
                                   bool directory) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int saved = errno;
    refuse(option, path, fmt::format("cannot be read: {}", std::generic_category().message(saved)));
  }
  if (directory && !S_ISDIR(st.st_mode)) refuse(option, path, "is not a directory");
  if (!directory && S_ISDIR(st.st_mode)) refuse(option, path, "is a directory, not a file");
  if (::access(path.c_str(), R_OK) != 0) {
    const int saved = errno;
    refuse(option, path, fmt::format("cannot be read: {}", std::generic_category().message(saved)));
  }
}

struct SslCtxFree {
  void operator()(SSL_CTX* ctx) const noexcept { SSL_CTX_free(ctx); }
};

/// What identifies one loaded configuration: the files and whether they are verified.
using ConfigKey = std::tuple<std::string, std::string, std::string, std::string, bool>;

FAIRSEM_INLINE ConfigKey key_of(const TlsOptions& tls) {
  return {tls.cacert, tls.cacertdir, tls.cert, tls.key, tls.insecure};
}

/// True when `host` is an IPv4 or IPv6 address literal (verified against IP SANs, no SNI).
FAIRSEM_INLINE bool is_ip_address(const std::string& host) {
  in6_addr v6{};
  in_addr v4{};
  return ::inet_pton(AF_INET, host.c_str(), &v4) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), &v6) == 1;
}

}  // namespace tls_helpers

class TlsConfig {
 public:
  explicit TlsConfig(const TlsOptions& tls) : ctx_(SSL_CTX_new(TLS_client_method())) {
    if (!ctx_) throw std::bad_alloc();
    SSL_CTX_set_min_proto_version(ctx_.get(), TLS1_2_VERSION);
    if (!tls.insecure) {
      SSL_CTX_set_verify(ctx_.get(), SSL_VERIFY_PEER, nullptr);
      load_trust(tls);
    }
    if (!tls.cert.empty()) load_client_certificate(tls);
  }

  SSL_CTX* get() const noexcept { return ctx_.get(); }

 private:
  void load_trust(const TlsOptions& tls) {
    if (tls.cacert.empty() && tls.cacertdir.empty()) {
      if (SSL_CTX_set_default_verify_paths(ctx_.get()) != 1) {
        throw InvalidArgument(fmt::format(
            "fairsem: invalid TLS options: the system's trust store cannot be loaded ({}); "
            "give cacert or cacertdir",
            tls_helpers::take_reason()));
      }
      return;
    }
    if (!tls.cacert.empty()) tls_helpers::check_readable("cacert", tls.cacert, false);
    if (!tls.cacertdir.empty()) tls_helpers::check_readable("cacertdir", tls.cacertdir, true);
    ERR_clear_error();
    const char* file = tls.cacert.empty() ? nullptr : tls.cacert.c_str();
    const char* dir = tls.cacertdir.empty() ? nullptr : tls.cacertdir.c_str();
    if (SSL_CTX_load_verify_locations(ctx_.get(), file, dir) != 1) {
      const bool blame_file = file != nullptr;
      tls_helpers::refuse(
          blame_file ? "cacert" : "cacertdir", blame_file ? tls.cacert : tls.cacertdir,
          fmt::format("holds no usable CA certificate ({})", tls_helpers::take_reason()));
    }
  }

  void load_client_certificate(const TlsOptions& tls) {
    tls_helpers::check_readable("cert", tls.cert, false);
    tls_helpers::check_readable("key", tls.key, false);
    ERR_clear_error();
    if (SSL_CTX_use_certificate_chain_file(ctx_.get(), tls.cert.c_str()) != 1) {
      tls_helpers::refuse("cert", tls.cert,
                          fmt::format("is not a PEM certificate ({})", tls_helpers::take_reason()));
    }
    // OpenSSL checks the key against the certificate as it loads it.
    if (SSL_CTX_use_PrivateKey_file(ctx_.get(), tls.key.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx_.get()) != 1) {
      const std::string reason = tls_helpers::take_reason();
      if (reason.find("mismatch") != std::string::npos) {
        tls_helpers::refuse("key", tls.key,
                            fmt::format("does not match the certificate in cert '{}' ({})",
                                        printable(tls.cert), reason));
      }
      tls_helpers::refuse("key", tls.key,
                          fmt::format("is not an unencrypted PEM private key ({})", reason));
    }
  }

  std::unique_ptr<SSL_CTX, tls_helpers::SslCtxFree> ctx_;
};

FAIRSEM_INLINE std::shared_ptr<const TlsConfig> tls_config(const TlsOptions& tls) {
  // A semaphore's watchdog thread can outlive main() for a moment (it may hold the last
  // reference, and is then parked: see thread_reaper.hpp; it is detached if the process is
  // exiting already). OpenSSL's own exit handler would free its state under a
  // handshake still running there and crash the exiting process: fairsem asks OpenSSL for no
  // exit handler (which works when fairsem is the first to initialise OpenSSL), and keeps its
  // own cache alive to the end.
  static const bool initialised =
      OPENSSL_init_ssl(
          OPENSSL_INIT_NO_ATEXIT | OPENSSL_INIT_LOAD_SSL_STRINGS | OPENSSL_INIT_LOAD_CRYPTO_STRINGS,
          nullptr) == 1;
  if (!initialised) throw ConnectionError("fairsem: OpenSSL cannot be initialised");
  // Connections with the same files share one loaded configuration (a pool of them, every
  // node of a cluster); it is loaded again once none is left, so rotated files are read then.
  struct Cache {
    std::mutex mutex;
    std::map<tls_helpers::ConfigKey, std::weak_ptr<const TlsConfig> > loaded;
  };
  static auto* const cache = new Cache;  // never destroyed: see above
  auto& loaded = cache->loaded;
  const tls_helpers::ConfigKey key = tls_helpers::key_of(tls);
  const std::lock_guard<std::mutex> lock(cache->mutex);
  auto it = loaded.find(key);
  if (it != loaded.end()) {
    if (auto config = it->second.lock()) return config;
  }
  auto config = std::make_shared<const TlsConfig>(tls);
  // Forget the configurations nobody uses any more before remembering this one.
  for (auto next = loaded.begin(); next != loaded.end();) {
    next = next->second.expired() ? loaded.erase(next) : std::next(next);
  }
  loaded[key] = config;
  return config;
}

FAIRSEM_INLINE void start_tls(redisContext& ctx, const TlsConfig& config, const TlsOptions& tls,
                              const std::string& host, const std::string& endpoint,
                              std::chrono::milliseconds timeout) {
  const std::string& name = tls.sni.empty() ? host : tls.sni;
  SSL* ssl = SSL_new(config.get());
  if (ssl == nullptr) throw std::bad_alloc();
  const bool ip = tls_helpers::is_ip_address(name);
  bool ready = ip || SSL_set_tlsext_host_name(ssl, name.c_str()) == 1;  // no SNI for an address
  if (ready && !tls.insecure) {
    if (ip) {
      ready = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str()) == 1;
    } else {
      SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      ready = SSL_set1_host(ssl, name.c_str()) == 1;
    }
  }
  if (!ready) {
    SSL_free(ssl);
    throw ConnectionError(fmt::format("fairsem: cannot connect to {}: TLS cannot use the name '{}'",
                                      endpoint, printable(name)));
  }
  ERR_clear_error();
  errno = 0;
  if (redisInitiateSSL(&ctx, ssl) == REDIS_OK) return;  // hiredis owns ssl from now on
  const int saved_errno = errno;
  const long verified = SSL_get_verify_result(ssl);  // NOLINT(google-runtime-int): OpenSSL's
  std::string reason = tls_helpers::take_reason();
  SSL_free(ssl);
  if (verified != X509_V_OK) {
    reason = fmt::format("certificate verify failed: {}", X509_verify_cert_error_string(verified));
  } else if (reason.empty() && (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK)) {
    throw TimeoutError(
        fmt::format("fairsem: connecting to {} timed out after {} ms (TLS handshake)", endpoint,
                    timeout.count()));
  } else if (reason.empty()) {
    reason = saved_errno != 0 ? std::generic_category().message(saved_errno)
                              : std::string("the server closed the connection");
  }
  throw ConnectionError(
      fmt::format("fairsem: cannot connect to {}: TLS handshake failed: {}", endpoint, reason));
}

FAIRSEM_INLINE std::string take_tls_error(const redisContext& ctx) {
  // hiredis keeps its TLS state in privctx, which nothing else of hiredis uses.
  return ctx.privctx != nullptr ? tls_helpers::take_reason() : std::string();
}

#endif

}  // namespace fairsem::detail
