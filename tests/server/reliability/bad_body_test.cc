// A request body that is not a protobuf AttendRequest (or, to AttendSessions,
// AttendSessionsRequest) gets INVALID_ARGUMENT saying so (issue 13: gRPC's
// generated handler answered UNIMPLEMENTED with an empty message).
#include <string>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"
#include "reliability_util.h"

namespace attn::testing {
namespace {

grpc::Status CallRaw(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                     const std::string& body) {
  grpc::GenericStub stub(channel);
  grpc::Slice slice(body);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  auto context = ContextWithDeadline(absl::Seconds(30));
  grpc::Status status;
  absl::Notification done;
  stub.UnaryCall(context.get(), "/attnserve.v1.Attention/" + method, grpc::StubOptions(),
                 &request, &response, [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  return status;
}

TEST(BadBodyTest, UnparseableBodyIsInvalidArgument) {
  auto server = ServerProcess::Start({"--backend=cpu", "--cpu_threads=1"});
  ASSERT_TRUE(server.ok()) << server.status();
  const auto channel = (*server)->NewChannel();
  for (const std::string& body : {std::string("\x0a\x05\x61", 3),   // truncated string field
                                  std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11),
                                  std::string("\x0b", 1)}) {        // a group start (wire type 3)
    for (const std::string method : {"Attend", "AttendSessions"}) {
      const grpc::Status status = CallRaw(channel, method, body);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
      EXPECT_TRUE(absl::StrContains(status.error_message(),
                                    "not a valid attnserve.v1." + method + "Request"))
          << method << ": " << status.error_message();
    }
  }
  // A well-formed request still works through the raw handler.
  auto stub = rpb::Attention::NewStub(channel);
  auto context = ContextWithDeadline(absl::Seconds(60));
  rpb::AttendResponse response;
  const rpb::AttendRequest request = SmallAttend("fine");
  ASSERT_TRUE(stub->Attend(context.get(), request, &response).ok());
  EXPECT_EQ(response.out().size(), request.q().size());
  EXPECT_EQ(response.request_id(), "fine");
}

}  // namespace
}  // namespace attn::testing
