// KV-cache sessions through the C++ client (AttentionClient's session
// calls) against the CPU-backend attn_server: the lease opened by the first
// call, prefill and decode of two sessions in one call each step checked
// against float64, fork and truncate, the client's end closing every
// session on the server, and refusals keeping their status and field.
#include <sys/wait.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "attn/client/attention_client.h"
#include "gtest/gtest.h"
#include "server_process.h"
#include "session_model.h"

namespace attn {
namespace {

namespace pb = ::attnserve::v1;
using ::attn::testing::ServerProcess;
using ::attn::tools::SessionModel;

constexpr double kTolerance = 2e-2;

class ClientSessionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerProcess::Options options;
    // 16 KiB pages: 32 tokens of 2 KV heads x 64 per half page.
    options.flags = {"--backend=cpu", "--cpu_threads=1", "--kv_page_bytes=16384",
                     "--kv_cache_bytes=8388608"};
    absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    client_ = Connect();
    ASSERT_NE(client_, nullptr);
  }

  std::unique_ptr<AttentionClient> Connect() {
    ClientOptions options;
    options.address = server_->address();
    absl::StatusOr<std::unique_ptr<AttentionClient>> client = AttentionClient::Connect(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  std::string Open(AttentionClient& client, int64_t layers = 2) {
    pb::SessionConfig config;
    config.set_dtype(pb::DTYPE_BFLOAT16);
    config.set_num_layers(static_cast<int32_t>(layers));
    config.set_num_heads(4);
    config.set_kv_num_heads(2);
    config.set_head_dim(64);
    config.set_max_tokens(1024);
    absl::StatusOr<pb::SessionInfo> info = client.OpenSession(config);
    EXPECT_TRUE(info.ok()) << info.status();
    if (!info.ok()) return "";
    model_.Add(info->session_id(), {layers, 4, 2, 64});
    return info->session_id();
  }

  // One checked step; the worst error against float64.
  double Step(int64_t layer, const std::vector<std::pair<std::string, int64_t>>& steps) {
    pb::AttendSessionsRequest request = model_.NewStep(layer, steps);
    absl::StatusOr<pb::AttendSessionsResponse> response = client_->AttendSessions(request);
    EXPECT_TRUE(response.ok()) << response.status();
    if (!response.ok()) return 1e9;
    EXPECT_FALSE(response->backend().empty());
    return model_.Check(request, *response);
  }

  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<AttentionClient> client_;
  SessionModel model_;
};

TEST_F(ClientSessionsTest, PrefillDecodeForkTruncateAgainstFloat64) {
  const std::string a = Open(*client_), b = Open(*client_);
  ASSERT_FALSE(a.empty());
  for (int64_t layer = 0; layer < 2; ++layer) {
    EXPECT_LT(Step(layer, {{a, 45}, {b, 3}}), kTolerance);  // crosses a page
  }
  for (int token = 0; token < 3; ++token) {
    for (int64_t layer = 0; layer < 2; ++layer) {
      EXPECT_LT(Step(layer, {{a, 1}, {b, 1}}), kTolerance) << "token " << token;
    }
  }
  absl::StatusOr<pb::SessionInfo> child = client_->ForkSession(a);
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_EQ(child->layer_tokens(1), 48);
  model_.Fork(a, child->session_id());
  for (int64_t layer = 0; layer < 2; ++layer) {
    EXPECT_LT(Step(layer, {{child->session_id(), 4}, {a, 1}}), kTolerance);
  }
  absl::StatusOr<pb::SessionInfo> cut = client_->TruncateSession(child->session_id(), 3);
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_EQ(cut->layer_tokens(0), 49);
  model_.Truncate(child->session_id(), 3);
  for (int64_t layer = 0; layer < 2; ++layer) {
    EXPECT_LT(Step(layer, {{child->session_id(), 1}, {a, 1}, {b, 1}}), kTolerance);
  }
  absl::StatusOr<std::vector<pb::SessionInfo>> listed = client_->ListSessions();
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->size(), 3u);
  ASSERT_TRUE(client_->CloseSession(b).ok());
  listed = client_->ListSessions();
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->size(), 2u);
}

TEST_F(ClientSessionsTest, TheClientsEndClosesItsSessions) {
  std::unique_ptr<AttentionClient> other = Connect();
  ASSERT_NE(other, nullptr);
  ASSERT_FALSE(Open(*other).empty());
  absl::StatusOr<pb::ServerStats> stats = client_->GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->sessions(), 1);
  // Another client's lease is another lease: it lists none of them.
  absl::StatusOr<std::vector<pb::SessionInfo>> mine = client_->ListSessions();
  ASSERT_TRUE(mine.ok()) << mine.status();
  EXPECT_TRUE(mine->empty());
  other.reset();
  const absl::Time until = absl::Now() + absl::Seconds(20);
  while (client_->GetStats()->sessions() != 0 && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(client_->GetStats()->sessions(), 0);
}

TEST_F(ClientSessionsTest, RefusalsKeepTheirStatusAndField) {
  const std::string a = Open(*client_, 1);
  pb::AttendSessionsRequest request = model_.NewStep(0, {{a, 2}});
  request.set_layer(1);
  absl::StatusOr<pb::AttendSessionsResponse> response = client_->AttendSessions(request);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(response.status().message().find("layer"), std::string::npos) << response.status();
  EXPECT_NE(response.status().message().find("AttendSessions"), std::string::npos)
      << response.status();
  EXPECT_EQ(client_->TruncateSession(a, 5).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(client_->CloseSession(a).ok());
  EXPECT_EQ(client_->ForkSession(a).status().code(), absl::StatusCode::kNotFound);
  pb::SessionConfig bad;
  bad.set_dtype(pb::DTYPE_BFLOAT16);
  bad.set_num_layers(1);
  bad.set_num_heads(4);
  bad.set_kv_num_heads(3);
  bad.set_head_dim(64);
  bad.set_max_tokens(16);
  absl::StatusOr<pb::SessionInfo> refused = client_->OpenSession(bad);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("kv_num_heads"), std::string::npos)
      << refused.status();
}

TEST_F(ClientSessionsTest, CliSessionDecodesAndChecks) {
  const std::string cli = absl::StrCat(ATTN_CLI_BINARY, " session --address=", server_->address(),
                                       " --session_shape=2,4,2,64 --prompt=40 --chunk=16 "
                                       "--generate=3 --check >/dev/null");
  int status = std::system(cli.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << cli;
  // An impossible tolerance is a failed check (exit 3), not a pass.
  status = std::system(absl::StrCat(cli, " --tolerance=0").c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3);
  // The command closed its sessions.
  EXPECT_EQ(client_->GetStats()->sessions(), 0);
}

}  // namespace
}  // namespace attn
