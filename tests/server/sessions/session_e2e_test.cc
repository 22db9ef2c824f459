// KV-cache sessions end to end: a lease, sessions prefilled and decoded
// over gRPC with every output checked against float64 attention over the
// session's history, fork and truncate, the lease's end freeing every
// page, and the refusals (sessions off, pool full, wrong sizes, another
// caller's lease). Compiled once per backend like e2e_test.cc:
// ATTN_E2E_BACKEND "cpu" (label cpu: the host page pool) and "cuda"
// (label gpu: the device page pool, skipped without a GPU).
#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "attn/device.h"
#include "attnserve/v1/attention.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "server_process.h"
#include "session_model.h"

namespace attn::server {
namespace {

namespace pb = ::attnserve::v1;
using attn::testing::ServerProcess;

#ifndef ATTN_E2E_BACKEND
#error "ATTN_E2E_BACKEND must be \"cpu\" or \"cuda\""
#endif
constexpr std::string_view kBackend = ATTN_E2E_BACKEND;
constexpr bool kCuda = kBackend == "cuda";

class Lease {
 public:
  explicit Lease(pb::Attention::Stub& stub) {
    reader_ = stub.HoldSessions(&context_, pb::HoldSessionsRequest());
    pb::HoldSessionsResponse response;
    if (reader_->Read(&response)) id_ = response.lease_id();
  }
  ~Lease() { End(); }
  const std::string& id() const { return id_; }
  void End() {
    if (reader_ == nullptr) return;
    context_.TryCancel();
    reader_->Finish();
    reader_.reset();
  }
  grpc::Status Finish() {
    grpc::Status status = reader_->Finish();
    reader_.reset();
    return status;
  }

 private:
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReader<pb::HoldSessionsResponse>> reader_;
  std::string id_;
};

class SessionE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kCuda && ListCudaDevices().empty()) GTEST_SKIP() << "no CUDA device visible";
  }

  // The server on this suite's backend (on CUDA one device: sessions serve
  // one) with `flags`.
  void StartServer(std::vector<std::string> flags) {
    stub_.reset();
    server_.reset();
    ServerProcess::Options options;
    options.flags = {"--backend=" + std::string(kBackend)};
    if (kCuda) options.flags.push_back("--devices=0");
    options.flags.insert(options.flags.end(), flags.begin(), flags.end());
    auto server = ServerProcess::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = pb::Attention::NewStub(server_->NewChannel());
  }

  grpc::Status Open(const std::string& lease, int64_t layers, int64_t hq, int64_t hkv, int64_t d,
                    int64_t max_tokens, std::string* id) {
    pb::OpenSessionRequest request;
    request.set_lease_id(lease);
    pb::SessionConfig* c = request.mutable_config();
    c->set_dtype(pb::DTYPE_BFLOAT16);
    c->set_num_layers(static_cast<int32_t>(layers));
    c->set_num_heads(static_cast<int32_t>(hq));
    c->set_kv_num_heads(static_cast<int32_t>(hkv));
    c->set_head_dim(static_cast<int32_t>(d));
    c->set_max_tokens(max_tokens);
    pb::OpenSessionResponse response;
    grpc::ClientContext context;
    grpc::Status status = stub_->OpenSession(&context, request, &response);
    if (status.ok()) {
      *id = response.session().session_id();
      model_.Add(*id, {layers, hq, hkv, d});
    }
    return status;
  }

  // One step call with fresh tokens; every output row checked against
  // float64. Returns the call's status (and the worst error in *worst).
  grpc::Status Step(const std::string& lease, int64_t layer,
                    const std::vector<std::pair<std::string, int64_t>>& steps, double* worst) {
    pb::AttendSessionsRequest request = model_.NewStep(layer, steps);
    request.set_lease_id(lease);
    pb::AttendSessionsResponse response;
    grpc::ClientContext context;
    grpc::Status status = stub_->AttendSessions(&context, request, &response);
    if (status.ok()) *worst = model_.Check(request, response);
    return status;
  }

  pb::ServerStats Stats() {
    pb::ServerStats stats;
    grpc::ClientContext context;
    EXPECT_TRUE(stub_->GetStats(&context, pb::GetStatsRequest(), &stats).ok());
    return stats;
  }

  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<pb::Attention::Stub> stub_;
  attn::tools::SessionModel model_;
};

constexpr double kTolerance = 2e-2;

TEST_F(SessionE2eTest, PrefillDecodeForkTruncateAgainstFloat64) {
  // 16 KiB pages: 32 tokens of 2 KV heads x 64 per half page.
  StartServer({"--kv_page_bytes=16384", "--kv_cache_bytes=16777216"});
  Lease lease(*stub_);
  ASSERT_FALSE(lease.id().empty());
  std::string a, b;
  ASSERT_TRUE(Open(lease.id(), 2, 8, 2, 64, 4096, &a).ok());
  ASSERT_TRUE(Open(lease.id(), 2, 8, 2, 64, 4096, &b).ok());
  double worst = 0;
  for (int64_t layer = 0; layer < 2; ++layer) {  // prefill in two chunks
    ASSERT_TRUE(Step(lease.id(), layer, {{a, 50}, {b, 7}}, &worst).ok());
    EXPECT_LT(worst, kTolerance);
    ASSERT_TRUE(Step(lease.id(), layer, {{a, 20}, {b, 30}}, &worst).ok());
    EXPECT_LT(worst, kTolerance);
  }
  for (int token = 0; token < 4; ++token) {
    for (int64_t layer = 0; layer < 2; ++layer) {
      grpc::Status s = Step(lease.id(), layer, {{a, 1}, {b, 1}}, &worst);
      ASSERT_TRUE(s.ok()) << s.error_message();
      EXPECT_LT(worst, kTolerance) << "decode token " << token << " layer " << layer;
    }
  }
  // Fork a, speculate 3 tokens on the child, reject 2 of them.
  pb::ForkSessionRequest fork;
  fork.set_lease_id(lease.id());
  fork.set_session_id(a);
  pb::ForkSessionResponse forked;
  grpc::ClientContext fork_context;
  ASSERT_TRUE(stub_->ForkSession(&fork_context, fork, &forked).ok());
  const std::string c = forked.session().session_id();
  model_.Fork(a, c);
  EXPECT_EQ(forked.session().layer_tokens(0), 74);
  for (int64_t layer = 0; layer < 2; ++layer) {
    ASSERT_TRUE(Step(lease.id(), layer, {{c, 3}, {a, 1}}, &worst).ok());
    EXPECT_LT(worst, kTolerance);
  }
  pb::TruncateSessionRequest cut;
  cut.set_lease_id(lease.id());
  cut.set_session_id(c);
  cut.set_tokens(2);
  pb::TruncateSessionResponse cut_response;
  grpc::ClientContext cut_context;
  ASSERT_TRUE(stub_->TruncateSession(&cut_context, cut, &cut_response).ok());
  EXPECT_EQ(cut_response.session().layer_tokens(1), 75);
  model_.Truncate(c, 2);
  for (int64_t layer = 0; layer < 2; ++layer) {
    ASSERT_TRUE(Step(lease.id(), layer, {{c, 1}, {a, 1}, {b, 1}}, &worst).ok());
    EXPECT_LT(worst, kTolerance);
  }
  pb::ServerStats stats = Stats();
  EXPECT_EQ(stats.sessions(), 3);
  EXPECT_EQ(stats.session_forks(), 1);
  EXPECT_GT(stats.kv_pages_used(), 0);
  EXPECT_EQ(stats.kv_tokens_cached(), 2 * (76 + 76 + 42));
  // Close one; the lease's end frees the rest.
  pb::CloseSessionRequest close;
  close.set_lease_id(lease.id());
  close.set_session_id(b);
  pb::CloseSessionResponse closed;
  grpc::ClientContext close_context;
  ASSERT_TRUE(stub_->CloseSession(&close_context, close, &closed).ok());
  EXPECT_EQ(Stats().sessions(), 2);
  lease.End();
  const absl::Time until = absl::Now() + absl::Seconds(20);
  while (Stats().kv_pages_used() != 0 && absl::Now() < until) absl::SleepFor(absl::Milliseconds(20));
  stats = Stats();
  EXPECT_EQ(stats.kv_pages_used(), 0);
  EXPECT_EQ(stats.sessions(), 0);
}

TEST_F(SessionE2eTest, ModelGeometryPromptsOnAndAcrossPageBoundaries) {
  // The default 128 KiB pages: 32 tokens of 8 KV heads x 128 per half page.
  StartServer({});
  Lease lease(*stub_);
  ASSERT_FALSE(lease.id().empty());
  const std::vector<int64_t> prompts = {1, 31, 32, 33, 100, 300};
  std::vector<std::string> ids(prompts.size());
  for (std::string& id : ids) ASSERT_TRUE(Open(lease.id(), 1, 32, 8, 128, 4096, &id).ok());
  pb::ListSessionsRequest list;
  list.set_lease_id(lease.id());
  pb::ListSessionsResponse listed;
  grpc::ClientContext list_context;
  ASSERT_TRUE(stub_->ListSessions(&list_context, list, &listed).ok());
  ASSERT_EQ(listed.sessions_size(), static_cast<int>(ids.size()));
  EXPECT_EQ(listed.sessions(0).page_tokens(), 32);
  EXPECT_EQ(listed.sessions(0).device(), kCuda ? 0 : -1);
  // Prefill in chunks of at most 128, every session in each call while it
  // has prompt left; then decode all of them together.
  double worst = 0;
  std::vector<int64_t> left = prompts;
  for (bool more = true; more;) {
    std::vector<std::pair<std::string, int64_t>> steps;
    for (size_t i = 0; i < ids.size(); ++i) {
      const int64_t n = std::min<int64_t>(left[i], 128);
      if (n > 0) steps.push_back({ids[i], n});
      left[i] -= n;
    }
    more = !steps.empty();
    if (!more) break;
    grpc::Status status = Step(lease.id(), 0, steps, &worst);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_LT(worst, kTolerance);
  }
  for (int token = 0; token < 3; ++token) {
    std::vector<std::pair<std::string, int64_t>> steps;
    for (const std::string& id : ids) steps.push_back({id, 1});
    grpc::Status status = Step(lease.id(), 0, steps, &worst);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_LT(worst, kTolerance) << "decode token " << token;
  }
  int64_t cached = 0;
  for (int64_t p : prompts) cached += p + 3;
  EXPECT_EQ(Stats().kv_tokens_cached(), cached);
}

TEST_F(SessionE2eTest, RefusalsNameTheFieldAndHarmNoOne) {
  // 8 pages of 16 KiB.
  StartServer({"--kv_page_bytes=16384", "--kv_cache_bytes=131072"});
  Lease lease(*stub_);
  std::string a, b;
  ASSERT_TRUE(Open(lease.id(), 1, 4, 2, 64, 100000, &a).ok());
  ASSERT_TRUE(Open(lease.id(), 1, 4, 2, 64, 100000, &b).ok());
  double worst = 0;
  ASSERT_TRUE(Step(lease.id(), 0, {{a, 100}}, &worst).ok());  // 4 pages of 32 tokens
  // Pool full: RESOURCE_EXHAUSTED naming pages; a is untouched.
  grpc::Status full = Step(lease.id(), 0, {{a, 1}, {b, 150}}, &worst);
  EXPECT_EQ(full.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(full.error_message().find("pages"), std::string::npos) << full.error_message();
  ASSERT_TRUE(Step(lease.id(), 0, {{a, 1}}, &worst).ok());
  EXPECT_LT(worst, kTolerance);
  EXPECT_EQ(Stats().rejected_pool_full(), 1);
  // Wrong q size.
  pb::AttendSessionsRequest bad;
  bad.set_lease_id(lease.id());
  pb::SessionStep* step = bad.add_steps();
  step->set_session_id(a);
  step->set_tokens(1);
  bad.set_q(std::string(10, '\0'));
  pb::AttendSessionsResponse response;
  grpc::ClientContext bad_context;
  grpc::Status s = stub_->AttendSessions(&bad_context, bad, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("q has 10 bytes"), std::string::npos) << s.error_message();
  // Layer out of range.
  bad.set_layer(1);
  grpc::ClientContext layer_context;
  s = stub_->AttendSessions(&layer_context, bad, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("layer"), std::string::npos) << s.error_message();
  // A bad config.
  std::string unused;
  s = Open(lease.id(), 1, 4, 3, 64, 10, &unused);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("kv_num_heads"), std::string::npos) << s.error_message();
  // Another connection is another caller: the lease is not its.
  auto other = pb::Attention::NewStub(
      grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  pb::ListSessionsRequest list;
  list.set_lease_id(lease.id());
  pb::ListSessionsResponse listed;
  grpc::ClientContext other_context;
  s = other->ListSessions(&other_context, list, &listed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  grpc::ClientContext own_context;
  ASSERT_TRUE(stub_->ListSessions(&own_context, list, &listed).ok());
  EXPECT_EQ(listed.sessions_size(), 2);
  // An unknown lease.
  list.set_lease_id("0123");
  grpc::ClientContext unknown_context;
  EXPECT_EQ(stub_->ListSessions(&unknown_context, list, &listed).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(SessionE2eTest, SessionsOffIsFailedPrecondition) {
  StartServer({"--kv_cache_bytes=0"});
  Lease lease(*stub_);
  EXPECT_TRUE(lease.id().empty());
  grpc::Status s = lease.Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("--kv_cache_bytes"), std::string::npos) << s.error_message();
  pb::ServerInfo info;
  grpc::ClientContext context;
  ASSERT_TRUE(stub_->GetServerInfo(&context, pb::GetServerInfoRequest(), &info).ok());
  EXPECT_FALSE(info.sessions().enabled());
}

}  // namespace
}  // namespace attn::server
