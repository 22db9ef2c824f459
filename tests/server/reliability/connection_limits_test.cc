// Calls at once on one connection are bounded (HTTP/2 MAX_CONCURRENT_STREAMS;
// issue 13: 1000 idle streams on one connection were accepted).
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "reliability_util.h"

namespace attn::testing {
namespace {

TEST(ConnectionLimitsTest, MaxConcurrentStreamsBoundsCallsPerConnection) {
  auto server = ServerProcess::Start({"--backend=cpu", "--cpu_threads=1",
                                      "--max_concurrent_streams=1"});
  ASSERT_TRUE(server.ok()) << server.status();
  const auto channel = (*server)->NewChannel();
  auto stub = rpb::Attention::NewStub(channel);
  auto other = rpb::Attention::NewStub((*server)->NewChannel());  // its own connection
  HeldUpload held(*stub);
  ASSERT_TRUE(Eventually([&] { return StatsOf(*other).stream_buffer_bytes() > 0; }));
  // Once the client has the server's SETTINGS, a second call on the held
  // call's connection waits for a free stream until its deadline.
  EXPECT_TRUE(Eventually([&] {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
    rpb::ServerInfo info;
    return stub->GetServerInfo(&context, rpb::GetServerInfoRequest(), &info).error_code() ==
           grpc::StatusCode::DEADLINE_EXCEEDED;
  })) << "a second call ran beside the held one on the same connection";
  rpb::ServerInfo info;
  auto context = ContextWithDeadline(absl::Seconds(30));
  ASSERT_TRUE(other->GetServerInfo(context.get(), rpb::GetServerInfoRequest(), &info).ok());
  EXPECT_EQ(info.limits().max_concurrent_streams(), 1);
  held.context->TryCancel();
  EXPECT_FALSE(held.ReadToEnd().ok());
  EXPECT_TRUE(Eventually([&] {
    grpc::ClientContext again;
    again.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    rpb::ServerInfo reply;
    return stub->GetServerInfo(&again, rpb::GetServerInfoRequest(), &reply).ok();
  })) << "the connection's stream was not given back";
}

}  // namespace
}  // namespace attn::testing
