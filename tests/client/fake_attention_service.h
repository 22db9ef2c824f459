// An in-process attnserve.v1.Attention service for the client library's
// tests: computes attention with the CPU kernel, and can misbehave on
// request (by kernel name) to exercise the client's error paths without
// depending on the real server.
//
// Kernel names with special behaviour:
//   "fail_invalid"   INVALID_ARGUMENT with a recognisable message
//   "wait_cancel"    blocks until the call is cancelled (deadline tests)
//   "fail_first"     the first call INVALID_ARGUMENT, every later one as
//                    "wait_cancel" (a split call's failing shard)
//   "hold"           blocks until ReleaseHeld() (then runs the CPU kernel) or
//                    until the call is cancelled
//   "bad_offset"     streamed reply whose second output chunk skips a byte
//   "short_output"   unary reply with one byte of output missing
//   "short_lse"      unary reply with one byte of the LSE missing
// Everything else runs the CPU kernel (every feature of attention.proto:
// kv shape, causal, window, LSE, varlen); streamed replies send the output's
// chunks, then the LSE's.
#ifndef ATTN_TESTS_CLIENT_FAKE_ATTENTION_SERVICE_H_
#define ATTN_TESTS_CLIENT_FAKE_ATTENTION_SERVICE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "attnserve/v1/attention.grpc.pb.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"

namespace attn::testing {

class FakeAttentionService final : public attnserve::v1::Attention::Service {
 public:
  struct Options {
    int64_t max_message_bytes = int64_t{1} << 30;  // advertised in GetServerInfo
    int workers = 0;                               // advertised; 0: not said
    int64_t max_tokens_per_request = 0;            // advertised; 0: not said (never enforced)
    int64_t out_chunk_bytes = 1000;                // streamed output chunk size
    int get_stats_delay_ms = 0;                    // GetStats reads its counters this late
    // Listening credentials; null: plaintext.
    std::shared_ptr<grpc::ServerCredentials> credentials;
  };
  explicit FakeAttentionService(Options options) : options_(options) {}

  grpc::Status Attend(grpc::ServerContext* context, const attnserve::v1::AttendRequest* request,
                      attnserve::v1::AttendResponse* response) override;
  grpc::Status AttendStream(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<attnserve::v1::AttendStreamResponse,
                               attnserve::v1::AttendStreamRequest>* stream) override;
  grpc::Status ListKernels(grpc::ServerContext* context,
                           const attnserve::v1::ListKernelsRequest* request,
                           attnserve::v1::ListKernelsResponse* response) override;
  grpc::Status GetServerInfo(grpc::ServerContext* context,
                             const attnserve::v1::GetServerInfoRequest* request,
                             attnserve::v1::ServerInfo* response) override;
  grpc::Status GetStats(grpc::ServerContext* context,
                        const attnserve::v1::GetStatsRequest* request,
                        attnserve::v1::ServerStats* response) override;

  // Calls that reached Attend and AttendStream.
  int64_t unary_calls() const { return unary_calls_.load(); }
  int64_t stream_calls() const { return stream_calls_.load(); }

  // Lets every "hold" call, held now or later, run.
  void ReleaseHeld();

 private:
  // Computes `request`'s output into `out` and its LSE (float32 bytes, with
  // return_lse) into `lse`, and the rest of the response into `response`.
  grpc::Status Compute(grpc::ServerContext* context, const attnserve::v1::AttendRequest& request,
                       attnserve::v1::AttendResponse* response, std::string* out,
                       std::string* lse);

  const Options options_;
  std::atomic<int64_t> unary_calls_{0};
  std::atomic<int64_t> stream_calls_{0};
  std::atomic<int64_t> fail_first_calls_{0};
  std::mutex hold_mu_;
  std::condition_variable hold_cv_;
  bool released_ = false;  // guarded by hold_mu_
};

// The service on a free loopback port, with the standard health service.
struct FakeServer {
  std::unique_ptr<FakeAttentionService> service;
  std::unique_ptr<grpc::Server> server;
  std::string address;  // "127.0.0.1:<port>"
};
std::unique_ptr<FakeServer> StartFakeServer(FakeAttentionService::Options options = {});

}  // namespace attn::testing

#endif  // ATTN_TESTS_CLIENT_FAKE_ATTENTION_SERVICE_H_
