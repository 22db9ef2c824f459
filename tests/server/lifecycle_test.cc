// End-to-end lifecycle of the attn_server process: start-up on a free port,
// health, graceful shutdown on SIGTERM/SIGINT, refusal of bad flags.
#include <signal.h>

#include "gtest/gtest.h"
#include "server_process.h"

namespace attn::testing {
namespace {

using grpc::health::v1::HealthCheckResponse;

TEST(LifecycleTest, ServesHealthAndExitsZeroOnSigterm) {
  auto server = ServerProcess::Start({"--backend=cpu"});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_NE((*server)->port(), 0);

  for (const char* service : {"", "attnserve.v1.Attention"}) {
    auto health = (*server)->Health(service);
    ASSERT_TRUE(health.ok()) << service << ": " << health.status();
    EXPECT_EQ(*health, HealthCheckResponse::SERVING) << service;
  }
  auto unknown = (*server)->Health("no.such.Service");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound) << unknown.status();

  auto exit = (*server)->Stop();
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_TRUE(exit->Clean()) << exit->ToString();
}

TEST(LifecycleTest, ExitsZeroOnSigint) {
  auto server = ServerProcess::Start({"--backend=cpu"});
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->Signal(SIGINT).ok());
  auto exit = (*server)->Wait(absl::Seconds(30));
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_TRUE(exit->Clean()) << exit->ToString();
}

TEST(LifecycleTest, BadFlagValueFailsStartup) {
  for (const char* flag : {"--backend=tpu", "--queue_capacity=-1", "--devices=zero",
                           "--max_message_bytes=10"}) {
    ServerProcess::Options options;
    options.flags = {flag};
    options.start_timeout = absl::Seconds(20);
    auto server = ServerProcess::Start(options);
    ASSERT_FALSE(server.ok()) << flag;
    EXPECT_EQ(server.status().code(), absl::StatusCode::kAborted) << server.status();
  }
}

}  // namespace
}  // namespace attn::testing
