// TLS and mutual TLS (attn_server --tls_cert, --tls_key, --tls_client_ca):
// a TLS client is served, a plaintext one is not, and with --tls_client_ca
// only clients holding a certificate from that CA are.
#include "gtest/gtest.h"
#include "security_util.h"

namespace attn::testing {
namespace {

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScopedTempDir("tls");
    pki_ = new TestPki(TestPki::Make(dir_->path()));
  }
  static void TearDownTestSuite() {
    delete pki_;
    delete dir_;
  }
  static ScopedTempDir* dir_;
  static TestPki* pki_;
};
ScopedTempDir* TlsTest::dir_ = nullptr;
TestPki* TlsTest::pki_ = nullptr;

TEST_F(TlsTest, TlsClientIsServedAndPlaintextClientIsNot) {
  ASSERT_TRUE(pki_->ok());
  ServerProcess::Options options;
  options.flags = pki_->TlsFlags();
  options.flags.push_back("--backend=cpu");
  options.credentials = pki_->Credentials();
  auto server = ServerProcess::Start(options);  // health over TLS said SERVING
  ASSERT_TRUE(server.ok()) << server.status();

  auto stub = attnserve::v1::Attention::NewStub((*server)->NewChannel());
  EXPECT_TRUE(GetServerInfo(*stub).ok());
  attnserve::v1::AttendResponse response;
  const grpc::Status attend = stub->Attend(CallWith("").get(), MakeRequest(MakeRandomInputs(
      {1, 16, 2, 64}, DType::kBFloat16, FreshSeed()), "tls"), &response);
  EXPECT_TRUE(attend.ok()) << attend.error_message();
  EXPECT_EQ(response.out().size(), 1u * 16 * 2 * 64 * 2);

  auto plaintext = attnserve::v1::Attention::NewStub(
      (*server)->NewChannel(grpc::InsecureChannelCredentials()));
  const grpc::Status refused = GetServerInfo(*plaintext);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error_message();
}

TEST_F(TlsTest, ClientCertificateIsRequiredWithClientCa) {
  ASSERT_TRUE(pki_->ok());
  ServerProcess::Options options;
  options.flags = pki_->TlsFlags();
  options.flags.push_back("--backend=cpu");
  options.flags.push_back("--tls_client_ca=" + pki_->ca_cert);
  options.credentials = pki_->Credentials(pki_->client_cert, pki_->client_key);
  auto server = ServerProcess::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();

  auto with_cert = attnserve::v1::Attention::NewStub((*server)->NewChannel());
  EXPECT_TRUE(GetServerInfo(*with_cert).ok());

  auto without_cert =
      attnserve::v1::Attention::NewStub((*server)->NewChannel(pki_->Credentials()));
  EXPECT_EQ(GetServerInfo(*without_cert).error_code(), grpc::StatusCode::UNAVAILABLE);

  auto stranger = attnserve::v1::Attention::NewStub((*server)->NewChannel(
      pki_->Credentials(pki_->stranger_cert, pki_->stranger_key)));
  EXPECT_EQ(GetServerInfo(*stranger).error_code(), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace attn::testing
