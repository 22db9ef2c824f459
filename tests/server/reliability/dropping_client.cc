// attn_test_dropping_client: a client that starts a call and never ends
// it, for dropped_client_test.cc to SIGKILL mid-call.
//
//   attn_test_dropping_client ADDRESS unary ID    an Attend minutes long on
//                                                 one CPU thread, waited on
//   attn_test_dropping_client ADDRESS stream ID   AttendStream: the header and
//                                                 one chunk of q, then nothing
//
// It dies with the process that started it (PR_SET_PDEATHSIG).
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "attnserve/v1/attention.grpc.pb.h"
#include "e2e_util.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/support/channel_arguments.h"
#include "test_util.h"

namespace rpb = ::attnserve::v1;
using attn::testing::Chunk;
using attn::testing::HeaderOf;
using attn::testing::MakeRandomInputs;
using attn::testing::MakeRequest;

int main(int argc, char** argv) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s ADDRESS unary|stream ID\n", argv[0]);
    return 2;
  }
  const std::string address = argv[1], mode = argv[2], id = argv[3];
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(1 << 30);
  args.SetMaxReceiveMessageSize(1 << 30);
  auto stub = rpb::Attention::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
  // Self-attention over 131072 keys: minutes on one CPU thread.
  const rpb::AttendRequest request = MakeRequest(
      MakeRandomInputs({1, 131072, 1, 64}, attn::DType::kBFloat16, 13), id);
  grpc::ClientContext context;
  if (mode == "unary") {
    rpb::AttendResponse response;
    const grpc::Status status = stub->Attend(&context, request, &response);
    std::fprintf(stderr, "dropping_client: the call ended (%d %s) before it was killed\n",
                 status.error_code(), status.error_message().c_str());
    return 1;
  }
  if (mode == "stream") {
    auto stream = stub->AttendStream(&context);
    if (!stream->Write(HeaderOf(request)) ||
        !stream->Write(Chunk(rpb::TENSOR_Q, 0, request.q().substr(0, 4096)))) {
      std::fprintf(stderr, "dropping_client: the stream broke before it was killed\n");
      return 1;
    }
    while (true) pause();
  }
  std::fprintf(stderr, "dropping_client: unknown mode '%s'\n", mode.c_str());
  return 2;
}
