// One byte budget over every admitted call, unary and streamed (issue 13:
// before it, queue capacity x 192 MiB of unary requests could be held).
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "reliability_util.h"

namespace attn::testing {
namespace {

grpc::Status AttendSmall(Stub& stub) {
  auto context = ContextWithDeadline(absl::Seconds(60));
  rpb::AttendResponse response;
  return stub.Attend(context.get(), SmallAttend("unary"), &response);
}

TEST(AdmittedBudgetTest, StreamedAndUnaryCallsShareOneBudget) {
  // Room for exactly one small call.
  auto server = ServerProcess::Start({"--backend=cpu", "--cpu_threads=1",
                                      absl::StrCat("--max_admitted_bytes=", kSmallCallBytes)});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = rpb::Attention::NewStub((*server)->NewChannel());
  ASSERT_TRUE(AttendSmall(*stub).ok()) << "one call fits";
  // Its bytes come back once the call is done on the server too.
  ASSERT_TRUE(Eventually([&] { return StatsOf(*stub).admitted_bytes() == 0; }));

  HeldUpload held(*stub);
  ASSERT_TRUE(Eventually([&] {
    const rpb::ServerStats stats = StatsOf(*stub);
    return stats.stream_buffer_bytes() == kSmallCallBytes &&
           stats.admitted_bytes() == kSmallCallBytes;
  })) << "the held upload was never admitted";
  const grpc::Status refused = AttendSmall(*stub);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_TRUE(absl::StrContains(refused.error_message(), "--max_admitted_bytes"))
      << refused.error_message();
  EXPECT_TRUE(absl::StrContains(refused.error_message(),
                                absl::StrCat(kSmallCallBytes, " of ", kSmallCallBytes)))
      << refused.error_message();
  const grpc::Status stream_refused = SendRawStream(*stub, {HeaderOf(SmallAttend("probe"))});
  EXPECT_EQ(stream_refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << stream_refused.error_message();
  EXPECT_GE(StatsOf(*stub).rejected_over_budget(), 2);

  held.context->TryCancel();
  EXPECT_FALSE(held.ReadToEnd().ok());
  EXPECT_TRUE(Eventually([&] { return StatsOf(*stub).admitted_bytes() == 0; }));
  EXPECT_TRUE(AttendSmall(*stub).ok()) << "the budget came back";
}

}  // namespace
}  // namespace attn::testing
