#include "test_certs.hpp"

#include <stdlib.h>  // NOLINT(modernize-deprecated-headers): POSIX mkdtemp
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "run_captured.hpp"
#include "test_env.hpp"

namespace fairsem::test {

namespace {

std::string find_openssl() {
  return find_in_path("openssl",
                      "The TLS tests make their certificates with it (apt-get install openssl; "
                      "scripts/test.sh does this).");
}

class Maker {
 public:
  explicit Maker(std::string dir) : dir_(std::move(dir)), openssl_(find_openssl()) {}

  void run(std::vector<std::string> args) const {
    args.insert(args.begin(), openssl_);
    // Valid from two days ago: a client whose clock is behind (the fake-clock tests run one an
    // hour behind) must not find the certificates not yet valid.
    if (const std::string faketime = find_libfaketime(); !faketime.empty()) {
      args.insert(args.begin(), {"/usr/bin/env", "LD_PRELOAD=" + faketime, "FAKETIME=-2d"});
    }
    const RunResult r = run_captured(args, std::chrono::seconds(30));
    if (r.status != 0 || r.timed_out) {
      std::string command;
      for (const std::string& a : args) command += a + ' ';
      throw std::runtime_error("making the test certificates failed: " + command + "\n" + r.output);
    }
  }

  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  /// A self-signed CA: name.crt and name.key.
  void ca(const std::string& name) const {
    run({"req", "-x509", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", path(name + ".key"), "-out", path(name + ".crt"), "-days", "3650", "-subj",
         "/CN=fairsem test " + name});
  }

  /// name.crt and name.key, signed by ca.crt, with `san` as its subjectAltName.
  void leaf(const std::string& name, const std::string& san) const {
    run({"req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
         path(name + ".key"), "-out", path(name + ".csr"), "-subj", "/CN=fairsem test " + name});
    const std::string ext = path(name + ".ext");
    std::ofstream(ext) << "subjectAltName=" << san << "\nbasicConstraints=CA:FALSE\n";
    run({"x509", "-req", "-in", path(name + ".csr"), "-CA", path("ca.crt"), "-CAkey",
         path("ca.key"), "-CAcreateserial", "-out", path(name + ".crt"), "-days", "3650",
         "-extfile", ext});
  }

 private:
  std::string dir_;
  std::string openssl_;
};

TestCerts make() {
  std::string tmpl = "/tmp/fairsem-certs-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
  }
  TestCerts c;
  c.dir = tmpl;
  const Maker m(c.dir);
  m.ca("ca");
  m.ca("stranger");
  m.leaf("server", "DNS:localhost,IP:127.0.0.1,IP:::1");
  m.leaf("other", "DNS:other.example");
  m.leaf("client", "DNS:fairsem-client");
  c.ca_cert = m.path("ca.crt");
  c.ca_key = m.path("ca.key");
  c.server_cert = m.path("server.crt");
  c.server_key = m.path("server.key");
  c.other_host_cert = m.path("other.crt");
  c.other_host_key = m.path("other.key");
  c.client_cert = m.path("client.crt");
  c.client_key = m.path("client.key");
  c.stranger_ca_cert = m.path("stranger.crt");
  c.ca_dir = m.path("cadir");
  if (::mkdir(c.ca_dir.c_str(), 0755) != 0) {
    throw std::runtime_error("mkdir " + c.ca_dir + ": " + std::strerror(errno));
  }
  std::ifstream in(c.ca_cert);
  std::ofstream(c.ca_dir + "/ca.pem") << in.rdbuf();
  m.run({"rehash", c.ca_dir});
  return c;
}

}  // namespace

const TestCerts& TestCerts::get() {
  struct Made {
    TestCerts certs = make();
    Made() = default;
    Made(const Made&) = delete;
    Made& operator=(const Made&) = delete;
    ~Made() {
      std::error_code ec;
      std::filesystem::remove_all(certs.dir, ec);
    }
  };
  static const Made made;
  return made.certs;
}

TlsOptions TestCerts::client_tls() const {
  TlsOptions tls;
  tls.enabled = true;
  tls.cacert = ca_cert;
  return tls;
}

TlsOptions TestCerts::mutual_tls() const {
  TlsOptions tls = client_tls();
  tls.cert = client_cert;
  tls.key = client_key;
  return tls;
}

ServerTls TestCerts::server_tls(bool auth_clients) const {
  ServerTls tls;
  tls.cert_file = server_cert;
  tls.key_file = server_key;
  tls.ca_file = ca_cert;
  tls.auth_clients = auth_clients;
  tls.client = auth_clients ? mutual_tls() : client_tls();
  return tls;
}

bool tls_requested() {
  const char* value = std::getenv("FAIRSEM_TEST_TLS");
  return value != nullptr && std::string(value) == "1";
}

}  // namespace fairsem::test
