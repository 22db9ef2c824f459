// The pure parts of server/security and the token file format: the token
// check and its constant-time comparison, which addresses are loopback, the
// exposure rule, and the file parser.
#include <string>
#include <vector>

#include "attn/token_file.h"
#include "gtest/gtest.h"
#include "security/bearer_tokens.h"
#include "security/exposure_policy.h"
#include "security_util.h"

namespace attn::server {
namespace {

TEST(ConstantTimeEqualsTest, EqualOnlyForTheSameBytes) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "ab"));
  EXPECT_FALSE(ConstantTimeEquals("ab", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("", "a"));
  // A NUL byte is a byte like any other (no C-string cut-off).
  EXPECT_FALSE(ConstantTimeEquals(absl::string_view("a\0b", 3), absl::string_view("a\0c", 3)));
}

TEST(BearerTokensTest, AnswersEachCase) {
  const BearerTokens tokens({"alpha", "beta-2"});
  EXPECT_TRUE(tokens.Check("Bearer alpha").ok());
  EXPECT_TRUE(tokens.Check("Bearer beta-2").ok());
  EXPECT_TRUE(tokens.Check("BEARER alpha ").ok());
  for (const char* wrong : {"Bearer alph", "Bearer alphaa", "Bearer beta", "Bearer gamma"}) {
    const absl::Status status = tokens.Check(wrong);
    EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated) << wrong;
    EXPECT_NE(status.message().find("invalid credential"), absl::string_view::npos) << wrong;
  }
  for (const char* malformed : {"alpha", "Basic alpha", "Bearer", "Bearer   ", ""}) {
    const absl::Status status = tokens.Check(malformed);
    EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated) << malformed;
    EXPECT_NE(status.message().find("malformed credential"), absl::string_view::npos)
        << malformed;
  }
  EXPECT_EQ(BearerTokens::Missing().code(), absl::StatusCode::kUnauthenticated);
}

TEST(ExposurePolicyTest, LoopbackAddresses) {
  for (const char* listen : {"127.0.0.1:50051", "127.0.0.1:0", "127.1.2.3:1", "localhost:50051",
                             "LOCALHOST:1", "[::1]:50051", "ipv4:127.0.0.1:5", "unix:/tmp/s",
                             "unix-abstract:attn"}) {
    EXPECT_TRUE(IsLoopbackListen(listen)) << listen;
  }
  for (const char* listen : {"0.0.0.0:50051", "[::]:50051", "10.0.0.1:50051", "128.0.0.1:1",
                             "127.0.0:1", "127.0.0.1.5:1", "gpu-node:50051", "[::2]:1",
                             "localhost.example.com:1", ":50051"}) {
    EXPECT_FALSE(IsLoopbackListen(listen)) << listen;
  }
}

TEST(ExposurePolicyTest, Rule) {
  std::string warning;
  SecurityOptions none;
  EXPECT_TRUE(CheckExposure("127.0.0.1:50051", none, &warning).ok());
  EXPECT_TRUE(warning.empty());
  EXPECT_EQ(CheckExposure("0.0.0.0:50051", none, &warning).code(),
            absl::StatusCode::kInvalidArgument);

  SecurityOptions insecure;
  insecure.insecure = true;
  EXPECT_TRUE(CheckExposure("0.0.0.0:50051", insecure, &warning).ok());
  EXPECT_NE(warning.find("--insecure"), std::string::npos);
  EXPECT_TRUE(CheckExposure("127.0.0.1:1", insecure, &warning).ok());
  EXPECT_TRUE(warning.empty()) << "loopback needs no warning";

  SecurityOptions tls;
  tls.tls_cert_path = "c.pem";
  tls.tls_key_path = "k.pem";
  EXPECT_TRUE(CheckExposure("0.0.0.0:50051", tls, &warning).ok());
  EXPECT_TRUE(warning.empty());
  tls.token_file = "tokens";
  EXPECT_TRUE(CheckExposure("[::]:50051", tls, &warning).ok());

  SecurityOptions token_only;
  token_only.token_file = "tokens";
  EXPECT_TRUE(CheckExposure("localhost:50051", token_only, &warning).ok());
  token_only.insecure = true;
  EXPECT_EQ(CheckExposure("0.0.0.0:50051", token_only, &warning).code(),
            absl::StatusCode::kInvalidArgument);

  SecurityOptions half;
  half.tls_key_path = "k.pem";
  EXPECT_EQ(CheckExposure("127.0.0.1:1", half, &warning).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TokenFileTest, ParsesTokensAndNamesTheFlagOnErrors) {
  const attn::testing::ScopedTempDir temp("token_file");
  const std::string& dir = temp.path();
  ASSERT_FALSE(dir.empty());
  attn::testing::WriteText(dir + "/ok", "# comment\n  first \n\r\nsecond\r\n");
  auto tokens = attn::ReadTokenFile(dir + "/ok", "--token_file");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(*tokens, (std::vector<std::string>{"first", "second"}));

  attn::testing::WriteText(dir + "/space", "two words\n");
  attn::testing::WriteText(dir + "/blank", "\n# nothing\n");
  for (const auto& [file, part] : {std::pair{"/space", "line 1"}, std::pair{"/blank", "no token"},
                                   std::pair{"/missing", "cannot read"}}) {
    auto bad = attn::ReadTokenFile(dir + file, "--token_file");
    ASSERT_FALSE(bad.ok()) << file;
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(bad.status().message().find("--token_file: "), absl::string_view::npos);
    EXPECT_NE(bad.status().message().find(part), absl::string_view::npos) << bad.status();
  }
}

}  // namespace
}  // namespace attn::server
