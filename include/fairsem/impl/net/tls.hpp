#pragma once

// TLS for fairsem's connections: the client settings built from TlsOptions (CA, client
// certificate), and the handshake on a connected hiredis context, with the server's
// certificate chain and name verified. Internal. Built only with FAIRSEM_TLS; without it,
// tls_config() refuses and tls_supported() is false.

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "fairsem/connection_options.hpp"

struct redisContext;

namespace fairsem::detail {

/// The refusal of TLS by a fairsem built without it; the one place that says how to get it.
inline constexpr std::string_view kTlsNotBuiltIn =
    "TLS (rediss://) is not built into this fairsem: build it against hiredis >= 1.0 with "
    "hiredis_ssl and OpenSSL (libssl-dev) and configure with -DFAIRSEM_TLS=ON";

/// The loaded settings of one TlsOptions (an OpenSSL SSL_CTX): CA certificates, client
/// certificate and key. Immutable once made; shared by every connection with equal options.
class TlsConfig;

/// The settings for `tls` (enabled), loaded now or shared with connections that use the same
/// files. Throws InvalidArgument naming the option and the path of a file that cannot be read
/// or used (a missing CA file, a key that does not match the certificate).
std::shared_ptr<const TlsConfig> tls_config(const TlsOptions& tls);

/// Runs the TLS handshake on `ctx`, a blocking TCP connection to `host`, within `timeout` per
/// read or write. Verifies the chain and `host` (or tls.sni) unless tls.insecure. Throws
/// TimeoutError, or ConnectionError "cannot connect to <endpoint>: TLS handshake failed:
/// <OpenSSL's reason>"; `ctx` is unusable then.
void start_tls(redisContext& ctx, const TlsConfig& config, const TlsOptions& tls,
               const std::string& host, const std::string& endpoint,
               std::chrono::milliseconds timeout);

/// For a failed read or write on `ctx`: OpenSSL's reason (e.g. "tlsv13 alert certificate
/// required") when `ctx` is a TLS connection and OpenSSL gave one on this thread, else "".
/// Clears OpenSSL's errors on this thread.
std::string take_tls_error(const redisContext& ctx);

}  // namespace fairsem::detail
