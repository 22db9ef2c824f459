// Bearer tokens (attn_server --token_file): every Attention RPC, unary and
// streaming, and reflection answer UNAUTHENTICATED with a message saying
// what is wrong unless the call carries an accepted token; health needs none.
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "gtest/gtest.h"
#include "security_util.h"

namespace attn::testing {
namespace {

namespace rpb = ::attnserve::v1;
namespace refl = ::grpc::reflection::v1alpha;

constexpr char kToken[] = "s3cret-token-0123456789";
constexpr char kSecondToken[] = "another.Token_42";

class TokenTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScopedTempDir("token");
    const std::string& dir = dir_->path();
    pki_ = new TestPki(TestPki::Make(dir));
    token_file_ = new std::string(dir + "/tokens");
    WriteText(*token_file_, absl::StrCat("# accepted tokens\n", kToken, "\n\n  ", kSecondToken,
                                         "  \n"));
  }
  static void TearDownTestSuite() {
    delete pki_;
    delete token_file_;
    delete dir_;
  }
  // A TLS server with the token file.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> StartServer() {
    ServerProcess::Options options;
    options.flags = pki_->TlsFlags();
    options.flags.push_back("--backend=cpu");
    options.flags.push_back("--token_file=" + *token_file_);
    options.credentials = pki_->Credentials();
    return ServerProcess::Start(options);
  }
  static ScopedTempDir* dir_;
  static TestPki* pki_;
  static std::string* token_file_;
};
ScopedTempDir* TokenTest::dir_ = nullptr;
TestPki* TokenTest::pki_ = nullptr;
std::string* TokenTest::token_file_ = nullptr;

rpb::AttendRequest SmallRequest(const std::string& id) {
  return MakeRequest(MakeRandomInputs({1, 16, 2, 64}, DType::kBFloat16, FreshSeed()), id);
}

TEST_F(TokenTest, MissingMalformedOrWrongTokenIsUnauthenticatedWithReason) {
  ASSERT_TRUE(pki_->ok());
  auto server = StartServer();
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = rpb::Attention::NewStub((*server)->NewChannel());

  const grpc::Status missing = GetServerInfo(*stub);
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(missing.error_message().find("missing credential"), std::string::npos)
      << missing.error_message();
  EXPECT_NE(missing.error_message().find("authorization: Bearer <token>"), std::string::npos)
      << missing.error_message();

  const grpc::Status malformed = GetServerInfo(*stub, std::string("Basic ") + kToken);
  EXPECT_EQ(malformed.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(malformed.error_message().find("malformed credential"), std::string::npos)
      << malformed.error_message();

  for (const std::string& wrong : {std::string("Bearer nope"),
                                  std::string("Bearer ") + kToken + "x",
                                  std::string("Bearer ") + std::string(kToken).substr(1)}) {
    const grpc::Status status = GetServerInfo(*stub, wrong);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << wrong;
    EXPECT_NE(status.error_message().find("invalid credential"), std::string::npos)
        << status.error_message();
    // The presented token is never echoed.
    EXPECT_EQ(status.error_message().find(wrong.substr(7)), std::string::npos)
        << status.error_message();
  }

  rpb::AttendResponse response;
  const grpc::Status attend =
      stub->Attend(CallWith("").get(), SmallRequest("no-token"), &response);
  EXPECT_EQ(attend.error_code(), grpc::StatusCode::UNAUTHENTICATED) << attend.error_message();
  EXPECT_TRUE(response.out().empty());
}

TEST_F(TokenTest, AcceptedTokensAreServed) {
  ASSERT_TRUE(pki_->ok());
  auto server = StartServer();
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = rpb::Attention::NewStub((*server)->NewChannel());

  for (const char* token : {kToken, kSecondToken}) {
    EXPECT_TRUE(GetServerInfo(*stub, std::string("Bearer ") + token).ok()) << token;
  }
  // The scheme is case-insensitive (RFC 7235).
  EXPECT_TRUE(GetServerInfo(*stub, std::string("bearer ") + kToken).ok());
  rpb::AttendResponse response;
  const grpc::Status attend = stub->Attend(CallWith(std::string("Bearer ") + kToken).get(),
                                           SmallRequest("token"), &response);
  ASSERT_TRUE(attend.ok()) << attend.error_message();
  EXPECT_EQ(response.out().size(), 1u * 16 * 2 * 64 * 2);
}

TEST_F(TokenTest, StreamingCallsAreCheckedToo) {
  ASSERT_TRUE(pki_->ok());
  auto server = StartServer();
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = rpb::Attention::NewStub((*server)->NewChannel());
  const rpb::AttendRequest request = SmallRequest("stream");

  for (const std::string& authorization : {std::string(""), std::string("Bearer wrong")}) {
    auto context = CallWith(authorization);
    auto stream = stub->AttendStream(context.get());
    stream->Write(HeaderOf(request));  // may fail once the call has ended
    stream->WritesDone();
    rpb::AttendStreamResponse part;
    EXPECT_FALSE(stream->Read(&part)) << "no output without a token";
    const grpc::Status status = stream->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << authorization;
    EXPECT_NE(status.error_message().find("credential"), std::string::npos)
        << status.error_message();
  }

  // With the token the same stream is answered in full.
  auto context = CallWith(std::string("Bearer ") + kToken);
  auto stream = stub->AttendStream(context.get());
  ASSERT_TRUE(stream->Write(HeaderOf(request)));
  for (auto [name, data] : {std::pair{rpb::TENSOR_Q, request.q()},
                            std::pair{rpb::TENSOR_K, request.k()},
                            std::pair{rpb::TENSOR_V, request.v()}}) {
    ASSERT_TRUE(stream->Write(Chunk(name, 0, data)));
  }
  stream->WritesDone();
  rpb::AttendStreamResponse part;
  int messages = 0;
  while (stream->Read(&part)) ++messages;
  const grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_GE(messages, 2) << "a header and at least one output chunk";
}

TEST_F(TokenTest, HealthNeedsNoTokenAndReflectionDoes) {
  ASSERT_TRUE(pki_->ok());
  auto server = StartServer();
  ASSERT_TRUE(server.ok()) << server.status();

  // ServerProcess::Health sends no metadata.
  auto health = (*server)->Health();
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, grpc::health::v1::HealthCheckResponse::SERVING);
  auto attention_health = (*server)->Health("attnserve.v1.Attention");
  ASSERT_TRUE(attention_health.ok()) << attention_health.status();

  auto stub = refl::ServerReflection::NewStub((*server)->NewChannel());
  auto list_services = [&stub](const std::string& authorization,
                               std::vector<std::string>* names) {
    auto context = CallWith(authorization);
    auto stream = stub->ServerReflectionInfo(context.get());
    refl::ServerReflectionRequest request;
    request.set_list_services("");
    stream->Write(request);
    stream->WritesDone();
    refl::ServerReflectionResponse response;
    while (stream->Read(&response)) {
      for (const auto& service : response.list_services_response().service()) {
        names->push_back(service.name());
      }
    }
    return stream->Finish();
  };
  std::vector<std::string> names;
  const grpc::Status refused = list_services("", &names);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAUTHENTICATED) << refused.error_message();
  EXPECT_TRUE(names.empty());
  const grpc::Status listed = list_services(std::string("Bearer ") + kToken, &names);
  EXPECT_TRUE(listed.ok()) << listed.error_message();
  EXPECT_NE(std::find(names.begin(), names.end(), "attnserve.v1.Attention"), names.end());
}

// attn_cli's exit code, with its stdout and stderr in `output`.
int RunCli(const std::string& args, const std::string& output_path, std::string* output) {
  const int status = std::system(
      absl::StrCat(ATTN_CLI_BINARY, " ", args, " >", output_path, " 2>&1").c_str());
  *output = ReadText(output_path);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_F(TokenTest, CliSendsTheTokenOfItsTokenFile) {
  ASSERT_TRUE(pki_->ok());
  auto server = StartServer();
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string connect =
      absl::StrCat("info --address=", (*server)->address(), " --tls_ca=", pki_->ca_cert);
  const std::string output_path = pki_->dir + "/cli.out";
  std::string output;
  EXPECT_EQ(RunCli(connect + " --token_file=" + *token_file_, output_path, &output), 0) << output;
  EXPECT_NE(output.find("backend"), std::string::npos) << output;
  EXPECT_EQ(RunCli(connect, output_path, &output), 1) << output;
  EXPECT_NE(output.find("UNAUTHENTICATED"), std::string::npos) << output;
  EXPECT_EQ(RunCli(connect + " --token_file=" + pki_->dir + "/no_such_file", output_path, &output),
            1)
      << output;
  EXPECT_NE(output.find("--token_file: cannot read"), std::string::npos) << output;
}

TEST_F(TokenTest, TokensWithoutTlsOnLoopback) {
  // Plaintext on loopback: gRPC's local credentials, which run the check.
  ServerProcess::Options options;
  options.flags = {"--backend=cpu", "--token_file=" + *token_file_};
  auto server = ServerProcess::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = rpb::Attention::NewStub((*server)->NewChannel());
  EXPECT_EQ(GetServerInfo(*stub).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(GetServerInfo(*stub, "Bearer wrong").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  const grpc::Status ok = GetServerInfo(*stub, std::string("Bearer ") + kSecondToken);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
}

}  // namespace
}  // namespace attn::testing
