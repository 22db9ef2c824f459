// The --insecure rule: attn_server listening beyond loopback without TLS or
// tokens refuses to start (exit 2, a message naming the flags) unless given
// --insecure, and then logs a warning; tokens beyond loopback need TLS.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "security_util.h"

namespace attn::testing {
namespace {

struct Outcome {
  absl::StatusOr<std::unique_ptr<ServerProcess>> server;
  std::string log;
};

// Starts attn_server on 0.0.0.0 (port 0) with `flags`, its log in a file.
Outcome StartOnWildcard(const std::string& dir, const std::vector<std::string>& flags,
                        std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr) {
  ServerProcess::Options options;
  options.listen_host = "0.0.0.0";
  options.flags = flags;
  options.flags.push_back("--backend=cpu");
  options.credentials = std::move(credentials);
  options.log_path = dir + "/server.log";
  options.start_timeout = absl::Seconds(60);
  Outcome outcome{ServerProcess::Start(options), ""};
  outcome.log = ReadText(options.log_path);
  return outcome;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(ExposureTest, WildcardWithoutTlsOrTokenRefusesToStart) {
  const ScopedTempDir temp("exposure_refused");
  const std::string& dir = temp.path();
  Outcome outcome = StartOnWildcard(dir, {});
  ASSERT_FALSE(outcome.server.ok());
  EXPECT_EQ(outcome.server.status().code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(Contains(std::string(outcome.server.status().message()), "exit code 2"))
      << outcome.server.status();
  for (const char* flag : {"--listen=0.0.0.0:0", "--tls_cert", "--tls_key", "--insecure"}) {
    EXPECT_TRUE(Contains(outcome.log, flag)) << flag << " not in: " << outcome.log;
  }
}

TEST(ExposureTest, WildcardWithInsecureStartsAndWarns) {
  const ScopedTempDir temp("exposure_insecure");
  const std::string& dir = temp.path();
  Outcome outcome = StartOnWildcard(dir, {"--insecure"});
  ASSERT_TRUE(outcome.server.ok()) << outcome.server.status();
  // " W ": the line is logged at warning level.
  EXPECT_TRUE(Contains(outcome.log, " W --insecure: serving 0.0.0.0:0 without TLS or tokens"))
      << outcome.log;
  auto exit = (*outcome.server)->Stop();
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_TRUE(exit->Clean()) << exit->ToString();
}

TEST(ExposureTest, WildcardWithTlsStartsWithoutInsecure) {
  const ScopedTempDir temp("exposure_tls");
  const std::string& dir = temp.path();
  const TestPki pki = TestPki::Make(dir);
  ASSERT_TRUE(pki.ok());
  Outcome outcome = StartOnWildcard(dir, pki.TlsFlags(), pki.Credentials());
  ASSERT_TRUE(outcome.server.ok()) << outcome.server.status();
  EXPECT_FALSE(Contains(outcome.log, "--insecure")) << outcome.log;
  EXPECT_TRUE(Contains(outcome.log, "(TLS)")) << outcome.log;
}

TEST(ExposureTest, TokensBeyondLoopbackNeedTls) {
  const ScopedTempDir temp("exposure_token");
  const std::string& dir = temp.path();
  WriteText(dir + "/tokens", "t0ken\n");
  for (bool insecure : {false, true}) {
    std::vector<std::string> flags = {"--token_file=" + dir + "/tokens"};
    if (insecure) flags.push_back("--insecure");
    Outcome outcome = StartOnWildcard(dir, flags);
    ASSERT_FALSE(outcome.server.ok());
    EXPECT_TRUE(Contains(std::string(outcome.server.status().message()), "exit code 2"))
        << outcome.server.status();
    EXPECT_TRUE(Contains(outcome.log, "--token_file with --listen=0.0.0.0:0 (beyond loopback) "
                                      "needs TLS"))
        << outcome.log;
  }
}

TEST(ExposureTest, BadSecurityFlagsNameTheFlag) {
  const ScopedTempDir temp("exposure_flags");
  const std::string& dir = temp.path();
  const TestPki pki = TestPki::Make(dir);
  ASSERT_TRUE(pki.ok());
  WriteText(dir + "/empty_tokens", "# none yet\n\n");
  struct Case {
    std::vector<std::string> flags;
    const char* exit;
    const char* message;
  } cases[] = {
      {{"--tls_cert=" + pki.server_cert}, "exit code 2",
       "--tls_cert and --tls_key must be given together"},
      {{"--tls_client_ca=" + pki.ca_cert}, "exit code 2", "--tls_client_ca (client certificates) needs TLS"},
      {{"--token_file=" + dir + "/missing"}, "exit code 1", "--token_file: cannot read"},
      {{"--token_file=" + dir + "/empty_tokens"}, "exit code 1", "holds no token"},
      {{"--tls_cert=" + dir + "/tokens_nowhere", "--tls_key=" + pki.server_key}, "exit code 1",
       "--tls_cert: cannot read"},
      {{"--tls_cert=" + pki.server_cert, "--tls_key=" + dir + "/empty_tokens"}, "exit code 1",
       "is not a PEM file"},
  };
  for (const Case& c : cases) {
    ServerProcess::Options options;
    options.flags = c.flags;
    options.flags.push_back("--backend=cpu");
    options.log_path = dir + "/server.log";
    auto server = ServerProcess::Start(options);
    ASSERT_FALSE(server.ok()) << c.message;
    EXPECT_TRUE(Contains(std::string(server.status().message()), c.exit))
        << c.message << ": " << server.status();
    const std::string log = ReadText(options.log_path);
    EXPECT_TRUE(Contains(log, c.message)) << c.message << " not in: " << log;
  }
}

}  // namespace
}  // namespace attn::testing
