// Secured ensembles from C++: zklock::Options (TLS, SASL, timeouts, holder id) and a Client made
// with them; refused credentials throw zklock::Error with ZKL_AUTH_FAILED. Exit code 0 when every
// check passed.
//
// Environment (a part whose server is not given is skipped):
//   ZKL_TLS_HOSTS    a TLS-only server requiring client certificates, e.g. "tcp+tls://127.0.0.1:2281"
//   ZKL_TLS_CA, ZKL_TLS_CERT, ZKL_TLS_KEY   PEM files: the CA, the client's certificate and key
//   ZKL_SASL_HOSTS   a server requiring SASL; ZKL_SASL_USER, ZKL_SASL_PASSWORD
//   ZKL_PATH         lock path prefix
#include <fstream>
#include <iostream>
#include <sstream>

#include "checks.hpp"

using namespace std::chrono_literals;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Takes and releases a mutex through c; prints and returns its fencing token.
int64_t lock_once(zklock::Client& c, const std::string& path, const char* what) {
  zklock::Lock m = c.mutex(path);
  zklock::Guard g(m, 10s);
  int64_t token = g.fencing_token();
  std::cout << what << ": held " << path << ", fencing token " << token << "\n";
  return token;
}

// The Error a connect with `options` throws (status ZKL_OK if it connected).
zklock::Error connect_error(const std::string& hosts, const zklock::Options& options) {
  try {
    zklock::Client c(hosts, options);
  } catch (const zklock::Error& e) {
    return e;
  }
  return zklock::Error(ZKL_OK, "connected");
}

}  // namespace

int main() {
  const std::string base = env_or("ZKL_PATH", "/zklock-examples") + "/cpp-secured";
  const std::string tls_hosts = env_or("ZKL_TLS_HOSTS", "");
  const std::string sasl_hosts = env_or("ZKL_SASL_HOSTS", "");
  std::cout << "secured.cpp: zklock " << zklock::version() << "\n";
  try {
    // Bad arguments throw at the setter; the object stays usable.
    zklock::Options probe;
    EXPECT_TRUE(throws_status([&] { probe.connect_timeout(-1ms); }, ZKL_INVALID_ARGUMENT));
    EXPECT_TRUE(throws_status([&] { probe.protocol(static_cast<zklock::Protocol>(7)); },
                              ZKL_INVALID_ARGUMENT));
    probe.session_timeout(6s).holder_id("probe");

    if (tls_hosts.empty()) {
      std::cout << "skip mutual TLS: ZKL_TLS_HOSTS not set\n";
    } else {
      const std::string ca = env_or("ZKL_TLS_CA", ""), cert = env_or("ZKL_TLS_CERT", ""),
                        key = env_or("ZKL_TLS_KEY", "");
      // Files, chained setters on a temporary.
      zklock::Client files(tls_hosts, zklock::Options()
                                          .connect_timeout(8s)
                                          .tls_ca_file(ca)
                                          .tls_identity_files(cert, key)
                                          .holder_id("secured.cpp"));
      EXPECT_TRUE(files.holder_id() == "secured.cpp");
      int64_t first = lock_once(files, base + "/tls", "mutual TLS (files)");
      // The same identity as PEM texts, from a named Options.
      zklock::Options pem;
      pem.tls_ca_pem(read_file(ca)).tls_identity_pem(read_file(cert), read_file(key));
      zklock::Client texts(tls_hosts, pem);
      EXPECT_TRUE(lock_once(texts, base + "/tls", "mutual TLS (PEM)") > first);

      zklock::Error e = connect_error(tls_hosts, zklock::Options().connect_timeout(8s).tls_ca_file(ca));
      std::cout << "mutual TLS without a client certificate: " << e.what() << "\n";
      EXPECT_TRUE(e.status() == ZKL_AUTH_FAILED);
      EXPECT_TRUE(contains(e.message(), "client certificate"));
      // The setting to give, in this layer's words.
      EXPECT_TRUE(contains(e.message(), "(Options::tls_identity_files)"));
    }

    if (sasl_hosts.empty()) {
      std::cout << "skip SASL: ZKL_SASL_HOSTS not set\n";
    } else {
      const std::string user = env_or("ZKL_SASL_USER", ""), password = env_or("ZKL_SASL_PASSWORD", "");
      zklock::Client bob(sasl_hosts, zklock::Options()
                                         .connect_timeout(8s)
                                         .sasl_digest_md5(user, password)
                                         .acl(zklock::Acl::creator_all));
      lock_once(bob, base + "/sasl", "SASL DIGEST-MD5");

      zklock::Error e =
          connect_error(sasl_hosts, zklock::Options().connect_timeout(8s).sasl_digest_md5(user, "wrong"));
      std::cout << "SASL with a wrong password: " << e.what() << "\n";
      EXPECT_TRUE(e.status() == ZKL_AUTH_FAILED);
      EXPECT_TRUE(contains(e.message(), user));
    }
  } catch (const zklock::Error& e) {
    std::cerr << "unexpected: " << e.what() << "\n";
    return 1;
  }
  if (failures) {
    std::cout << "secured.cpp: " << failures << " checks FAILED\n";
    return 1;
  }
  std::cout << "secured.cpp: all checks passed\n";
  return 0;
}
