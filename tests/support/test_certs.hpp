#pragma once

// Certificates for the TLS tests, made with the `openssl` tool once per test process in a
// private temporary directory: a CA, certificates it signed for the servers (localhost,
// 127.0.0.1 and ::1), for another host name and for a client, and a stranger CA that signed
// none of them. EC P-256 keys, unencrypted, valid for ten years.

#include <string>

#include "fairsem/connection_options.hpp"
#include "redis_server.hpp"

namespace fairsem::test {

struct TestCerts {
  std::string dir;
  std::string ca_cert, ca_key;
  /// subjectAltName DNS:localhost, IP:127.0.0.1, IP:::1.
  std::string server_cert, server_key;
  /// subjectAltName DNS:other.example only: valid, but for another host.
  std::string other_host_cert, other_host_key;
  /// For mutual TLS (tls-auth-clients yes).
  std::string client_cert, client_key;
  /// A CA that signed none of the above.
  std::string stranger_ca_cert;
  /// A directory holding ca_cert under its hash name (for TlsOptions::cacertdir).
  std::string ca_dir;

  /// The process's certificates, made on first use; throws std::runtime_error saying what
  /// failed (e.g. openssl missing from PATH).
  static const TestCerts& get();

  /// Client settings that trust ca_cert and present no certificate.
  TlsOptions client_tls() const;
  /// As client_tls(), presenting client_cert.
  TlsOptions mutual_tls() const;
  /// A server with server_cert, checking client certificates against ca_cert when
  /// `auth_clients`; the harness connects with client_tls() (mutual_tls() when auth_clients).
  ServerTls server_tls(bool auth_clients = false) const;
};

/// True when FAIRSEM_TEST_TLS=1: the shared test server (and the stress run's) speaks only TLS,
/// so every integration test runs over TLS (CI's TLS configuration).
bool tls_requested();

}  // namespace fairsem::test
