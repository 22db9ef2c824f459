// PrometheusMetrics without a server: what RecordOutcome counts, the
// histograms' counts, sums and buckets in seconds, the gauges read from the
// load source at each collection, and that server/METRICS.md documents every
// metric it exposes.
#include "observability/prometheus_metrics.h"

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "metrics_text.h"

#ifndef ATTN_METRICS_DOC
#error "ATTN_METRICS_DOC must name server/METRICS.md (set by CMake)"
#endif

namespace attn::server {
namespace {

using ::attn::testing::SampleValue;

OutcomeSample Ok(absl::string_view kernel, int64_t queue_ns, int64_t kernel_ns, int64_t total_ns) {
  OutcomeSample s;
  s.rpc = "Attend";
  s.kernel = kernel;
  s.times.queue_ns = queue_ns;
  s.times.kernel_ns = kernel_ns;
  s.times.total_ns = total_ns;
  s.bytes_in = 3 * 4096;
  s.bytes_out = 4096;
  return s;
}

TEST(PrometheusMetricsTest, CountsCallsByStatusAndKernel) {
  PrometheusMetrics metrics;
  metrics.RecordOutcome(Ok("cpu_reference", 200'000, 2'000'000, 3'000'000));  // 0.2 ms, 2 ms, 3 ms
  metrics.RecordOutcome(
      Ok("cpu_reference", 300'000, 40'000'000, 50'000'000));  // 0.3 ms, 40 ms, 50 ms
  OutcomeSample stream = Ok("k16_static_strides", 0, 1'000'000, 2'000'000);
  stream.rpc = "AttendStream";
  metrics.RecordOutcome(stream);
  OutcomeSample full;
  full.rpc = "Attend";
  full.kernel = "cpu_reference";
  full.code = absl::StatusCode::kResourceExhausted;
  full.ended_by = "queue_full";
  metrics.RecordOutcome(full);
  OutcomeSample undecoded;
  undecoded.rpc = "Attend";
  undecoded.code = absl::StatusCode::kInvalidArgument;
  undecoded.ended_by = "request";
  metrics.RecordOutcome(undecoded);

  const std::string text = metrics.Text();
  SCOPED_TRACE(text);
  EXPECT_EQ(
      SampleValue(text,
                  R"(attn_inference_request_success_total{kernel="cpu_reference",rpc="Attend"})"),
      2);
  EXPECT_EQ(
      SampleValue(
          text,
          R"(attn_inference_request_success_total{kernel="k16_static_strides",rpc="AttendStream"})"),
      1);
  EXPECT_EQ(
      SampleValue(
          text,
          R"(attn_inference_request_failure_total{code="RESOURCE_EXHAUSTED",kernel="cpu_reference",reason="queue_full",rpc="Attend"})"),
      1);
  EXPECT_EQ(
      SampleValue(
          text,
          R"(attn_inference_request_failure_total{code="INVALID_ARGUMENT",kernel="none",reason="request",rpc="Attend"})"),
      1);
  // Bytes and durations count calls answered OK only.
  EXPECT_EQ(SampleValue(text, "attn_inference_input_bytes_total"), 3 * 3 * 4096);
  EXPECT_EQ(SampleValue(text, "attn_inference_output_bytes_total"), 3 * 4096);
  EXPECT_EQ(
      SampleValue(text, R"(attn_inference_request_duration_seconds_count{kernel="cpu_reference"})"),
      2);
  EXPECT_NEAR(
      *SampleValue(text, R"(attn_inference_request_duration_seconds_sum{kernel="cpu_reference"})"),
      0.053, 1e-12);
  // Cumulative buckets in seconds: 3 ms is under 5 ms, 50 ms is not under 25 ms.
  EXPECT_EQ(
      SampleValue(
          text,
          R"(attn_inference_request_duration_seconds_bucket{kernel="cpu_reference",le="0.005"})"),
      1);
  EXPECT_EQ(
      SampleValue(
          text,
          R"(attn_inference_request_duration_seconds_bucket{kernel="cpu_reference",le="0.025"})"),
      1);
  EXPECT_EQ(
      SampleValue(
          text,
          R"(attn_inference_request_duration_seconds_bucket{kernel="cpu_reference",le="0.05"})"),
      2);
  EXPECT_EQ(
      SampleValue(
          text,
          R"(attn_inference_request_duration_seconds_bucket{kernel="cpu_reference",le="+Inf"})"),
      2);
  EXPECT_EQ(
      SampleValue(
          text,
          R"(attn_inference_queue_duration_seconds_bucket{kernel="cpu_reference",le="0.00025"})"),
      1);
  EXPECT_NEAR(
      *SampleValue(text,
                   R"(attn_inference_compute_infer_duration_seconds_sum{kernel="cpu_reference"})"),
      0.042, 1e-12);
  EXPECT_EQ(
      SampleValue(
          text,
          R"(attn_inference_compute_input_duration_seconds_count{kernel="k16_static_strides"})"),
      1);
  EXPECT_EQ(
      SampleValue(
          text, R"(attn_inference_compute_output_duration_seconds_count{kernel="cpu_reference"})"),
      2);
  EXPECT_NE(text.find("# TYPE attn_inference_request_duration_seconds histogram"),
            std::string::npos);
  EXPECT_NE(text.find("# TYPE attn_inference_request_success_total counter"), std::string::npos);
}

TEST(PrometheusMetricsTest, GaugesComeFromTheLoadSourceAtEachCollection) {
  PrometheusMetrics metrics;
  // No source yet (the runtime is not up): no gauges at all.
  EXPECT_EQ(SampleValue(metrics.Text(), "attn_inference_pending_requests"), std::nullopt);

  LoadSnapshot load;
  load.queued = 3;
  load.running = 2;
  load.stream_buffer_bytes = 1000;
  load.stream_buffer_limit_bytes = 4000;
  load.admitted_bytes = 1500;
  load.admitted_limit_bytes = 8000;
  load.workers = {{"cpu (2 threads)", true}, {"cpu (2 threads)", false}};
  load.sessions = 7;
  load.kv_pages_total = 2048;
  load.kv_pages_used = 300;
  load.kv_tokens_cached = 9000;
  load.session_steps = 41;
  load.session_tokens_appended = 1234;
  load.session_forks = 2;
  load.sessions_expired = 1;
  load.rejected_pool_full = 5;
  metrics.SetLoadSource([&load]() { return load; });
  std::string text = metrics.Text();
  SCOPED_TRACE(text);
  EXPECT_EQ(SampleValue(text, "attn_inference_pending_requests"), 3);
  EXPECT_EQ(SampleValue(text, "attn_inference_in_flight_requests"), 5);
  EXPECT_EQ(SampleValue(text, "attn_stream_buffer_bytes"), 1000);
  EXPECT_EQ(SampleValue(text, "attn_stream_buffer_limit_bytes"), 4000);
  EXPECT_EQ(SampleValue(text, "attn_admitted_bytes"), 1500);
  EXPECT_EQ(SampleValue(text, "attn_admitted_limit_bytes"), 8000);
  EXPECT_EQ(SampleValue(text, "attn_kv_sessions"), 7);
  EXPECT_EQ(SampleValue(text, "attn_kv_cache_pages"), 2048);
  EXPECT_EQ(SampleValue(text, "attn_kv_cache_pages_used"), 300);
  EXPECT_EQ(SampleValue(text, "attn_kv_cache_tokens"), 9000);
  EXPECT_EQ(SampleValue(text, "attn_session_steps_total"), 41);
  EXPECT_EQ(SampleValue(text, "attn_session_tokens_appended_total"), 1234);
  EXPECT_EQ(SampleValue(text, "attn_session_forks_total"), 2);
  EXPECT_EQ(SampleValue(text, "attn_sessions_expired_total"), 1);
  EXPECT_EQ(SampleValue(text, "attn_session_pool_full_total"), 5);
  EXPECT_EQ(SampleValue(text, R"m(attn_worker_healthy{executor="cpu (2 threads)",worker="0"})m"),
            1);
  EXPECT_EQ(SampleValue(text, R"m(attn_worker_healthy{executor="cpu (2 threads)",worker="1"})m"),
            0);

  load.queued = 0;  // read again at the next collection
  EXPECT_EQ(SampleValue(metrics.Text(), "attn_inference_pending_requests"), 0);
  metrics.SetLoadSource(nullptr);
  EXPECT_EQ(SampleValue(metrics.Text(), "attn_worker_healthy"), std::nullopt);
}

TEST(PrometheusMetricsTest, MetricsDocDocumentsEveryMetric) {
  std::ifstream file(ATTN_METRICS_DOC);
  ASSERT_TRUE(file) << "cannot read " << ATTN_METRICS_DOC;
  std::stringstream doc;
  doc << file.rdbuf();

  PrometheusMetrics metrics;
  // Families appear once they have a sample: one call of each outcome.
  metrics.RecordOutcome(Ok("cpu_reference", 1, 1, 1));
  OutcomeSample failed;
  failed.code = absl::StatusCode::kInternal;
  metrics.RecordOutcome(failed);
  metrics.SetLoadSource([]() { return LoadSnapshot{}; });
  std::set<std::string> names;
  for (const prometheus::MetricFamily& family : metrics.Collect()) names.insert(family.name);
  EXPECT_GE(names.size(), 16u);
  for (const std::string& name : names) {
    EXPECT_NE(doc.str().find(absl::StrCat("`", name, "`")), std::string::npos)
        << name << " is exposed but not documented in " << ATTN_METRICS_DOC;
  }
}

}  // namespace
}  // namespace attn::server
