// tests/server/security/security_util.h
//
// What the security suites share: a throw-away PKI made with the openssl CLI
// in a fresh temporary directory (a CA, a server certificate for 127.0.0.1
// and localhost, a client certificate the CA signed, and one it did not),
// token files, TLS channel credentials, and calls with a bearer token.
// Nothing here is checked in: every key is generated at test time.
#ifndef ATTN_TESTS_SERVER_SECURITY_SECURITY_UTIL_H_
#define ATTN_TESTS_SERVER_SECURITY_SECURITY_UTIL_H_

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "attnserve/v1/attention.grpc.pb.h"
#include "e2e_util.h"
#include "grpcpp/client_context.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "server_process.h"

namespace attn::testing {

inline std::string ReadText(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

inline void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

// A fresh directory under $TMPDIR named after `name`, removed with all it
// holds when this goes out of scope.
class ScopedTempDir {
 public:
  explicit ScopedTempDir(const std::string& name) {
    const char* root = std::getenv("TMPDIR");
    path_ = std::string(root != nullptr && *root != '\0' ? root : "/tmp") + "/attn_sec_" + name +
            ".XXXXXX";
    if (mkdtemp(path_.data()) == nullptr) path_.clear();
  }
  ~ScopedTempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Certificates and keys (PEM files) in `dir`; ok() once all were made.
struct TestPki {
  std::string dir;
  std::string ca_cert, server_cert, server_key, client_cert, client_key;
  std::string stranger_cert, stranger_key;  // self-signed: not from the CA
  bool made = false;

  bool ok() const { return made; }

  static TestPki Make(const std::string& dir) {
    TestPki pki;
    pki.dir = dir;
    auto path = [&dir](const char* name) { return dir + "/" + name; };
    pki.ca_cert = path("ca.crt");
    pki.server_cert = path("server.crt");
    pki.server_key = path("server.key");
    pki.client_cert = path("client.crt");
    pki.client_key = path("client.key");
    pki.stranger_cert = path("stranger.crt");
    pki.stranger_key = path("stranger.key");
    WriteText(path("server.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
    WriteText(path("client.ext"), "extendedKeyUsage=clientAuth\n");
    const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    const std::string cd = "cd '" + dir + "' && ";
    const std::string commands[] = {
        "openssl req -x509 " + key + " -keyout ca.key -out ca.crt -days 2 -subj /CN=attn-test-ca",
        "openssl req " + key + " -keyout server.key -out server.csr -subj /CN=localhost",
        "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
        "-out server.crt -days 2 -extfile server.ext",
        "openssl req " + key + " -keyout client.key -out client.csr -subj /CN=attn-test-client",
        "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
        "-out client.crt -days 2 -extfile client.ext",
        "openssl req -x509 " + key +
            " -keyout stranger.key -out stranger.crt -days 2 -subj /CN=attn-test-stranger",
    };
    for (const std::string& command : commands) {
      if (std::system((cd + command + " 2>/dev/null >/dev/null").c_str()) != 0) {
        ADD_FAILURE() << "failed: " << command;
        return pki;
      }
    }
    pki.made = true;
    return pki;
  }

  // TLS trusting the CA; with the client certificate `cert`/`key` if given.
  std::shared_ptr<grpc::ChannelCredentials> Credentials(const std::string& cert = "",
                                                        const std::string& key = "") const {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ReadText(ca_cert);
    if (!cert.empty()) {
      ssl.pem_cert_chain = ReadText(cert);
      ssl.pem_private_key = ReadText(key);
    }
    return grpc::SslCredentials(ssl);
  }
  std::vector<std::string> TlsFlags() const {
    return {"--tls_cert=" + server_cert, "--tls_key=" + server_key};
  }
};

// A context with a 30 s deadline and, unless empty, `authorization`.
inline std::unique_ptr<grpc::ClientContext> CallWith(const std::string& authorization) {
  auto context = ContextWithDeadline(absl::Seconds(30));
  if (!authorization.empty()) context->AddMetadata("authorization", authorization);
  return context;
}

inline grpc::Status GetServerInfo(Stub& stub, const std::string& authorization = "") {
  attnserve::v1::ServerInfo info;
  return stub.GetServerInfo(CallWith(authorization).get(), attnserve::v1::GetServerInfoRequest(),
                            &info);
}

}  // namespace attn::testing

#endif  // ATTN_TESTS_SERVER_SECURITY_SECURITY_UTIL_H_
