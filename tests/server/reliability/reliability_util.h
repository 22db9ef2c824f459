// tests/server/reliability/reliability_util.h
//
// Helpers for the reliability suites (issue 13): waiting on a condition with
// a generous bound (never a fixed sleep), the server's counters, an
// AttendStream upload the test holds open, and the server's log.
#ifndef ATTN_TESTS_SERVER_RELIABILITY_RELIABILITY_UTIL_H_
#define ATTN_TESTS_SERVER_RELIABILITY_RELIABILITY_UTIL_H_

#include <cmath>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "attnserve/v1/attention.grpc.pb.h"
#include "e2e_util.h"
#include "grpcpp/client_context.h"
#include "server_process.h"
#include "test_util.h"

namespace attn::testing {

namespace rpb = ::attnserve::v1;

// Polls `predicate` until it holds (true) or `bound` passes (false).
template <typename Predicate>
bool Eventually(Predicate predicate, absl::Duration bound = absl::Seconds(60)) {
  const absl::Time deadline = absl::Now() + bound;
  while (absl::Now() < deadline) {
    if (predicate()) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return predicate();
}

// GetStats, or an empty message if the call fails.
inline rpb::ServerStats StatsOf(Stub& stub) {
  auto context = ContextWithDeadline(absl::Seconds(10));
  rpb::ServerStats stats;
  if (!stub.GetStats(context.get(), rpb::GetStatsRequest(), &stats).ok()) return {};
  return stats;
}

// A request of shape 1x16x2x64 bf16: 4096 bytes each of q, k, v and out.
inline rpb::AttendRequest SmallAttend(const std::string& id) {
  return MakeRequest(MakeRandomInputs({1, 16, 2, 64}, DType::kBFloat16, FreshSeed()), id);
}
constexpr int64_t kSmallCallBytes = 4 * 4096;

// `out` of a bf16 call on `in` against float64 (default softmax scale):
// every element finite, relative L2 error below 1e-2 (plumbing mistakes
// give errors of order 1).
inline ::testing::AssertionResult MatchesReference(const HostInputs& in, const std::string& out) {
  return OutputMatchesReference(in, 1.0 / std::sqrt(static_cast<double>(in.shape.head_dim)), out,
                                1e-2);
}

// An AttendStream call that has sent its header and nothing more.
struct HeldUpload {
  std::unique_ptr<grpc::ClientContext> context = ContextWithDeadline(absl::Seconds(300));
  std::unique_ptr<grpc::ClientReaderWriter<rpb::AttendStreamRequest, rpb::AttendStreamResponse>>
      stream;

  explicit HeldUpload(Stub& stub, const rpb::AttendRequest& request = SmallAttend("held")) {
    stream = stub.AttendStream(context.get());
    stream->Write(HeaderOf(request));
  }
  // Reads to the call's end, sending nothing more; its status.
  grpc::Status ReadToEnd() {
    rpb::AttendStreamResponse part;
    while (stream->Read(&part)) {
    }
    return stream->Finish();
  }
};

inline std::string ReadWholeFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// The request-log line of call `id` in `log` (the server's log text), from
// "id=" to the end of the line; empty until it is written.
inline std::string RequestLogLine(const std::string& log, const std::string& id) {
  const size_t at = log.find("id=" + id + " ");
  if (at == std::string::npos) return "";
  const size_t end = log.find('\n', at);
  if (end == std::string::npos) return "";
  return log.substr(at, end - at);
}

// A fresh path for a server log under $TMPDIR.
inline std::string TempLogPath(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/attn_rel_" + name + "_" +
         std::to_string(FreshSeed()) + ".log";
}

}  // namespace attn::testing

#endif  // ATTN_TESTS_SERVER_RELIABILITY_RELIABILITY_UTIL_H_
