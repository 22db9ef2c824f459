#include "observability/prometheus_metrics.h"

#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "prometheus/client_metric.h"
#include "prometheus/metric_type.h"
#include "prometheus/text_serializer.h"

namespace attn::server {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// Upper bounds (seconds) of every duration histogram: 100 us (a small CPU
// call's queue wait) to 60 s (a B=4, S=16384 call on the CPU reference).
const prometheus::Histogram::BucketBoundaries& DurationBuckets() {
  static const auto* const buckets = new prometheus::Histogram::BucketBoundaries{
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
      0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30,    60};
  return *buckets;
}

// The label value of a call whose request did not decode (no kernel known).
constexpr char kNoKernel[] = "none";

prometheus::Family<prometheus::Counter>& CounterFamily(prometheus::Registry& registry,
                                                       const std::string& name,
                                                       const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

// A metric that reports one int64_t field of a `Source` struct.
template <typename Source>
struct FieldMetric {
  const char* name;
  const char* help;
  int64_t Source::*field;
};

// The duration histograms: one per phase of a call (Timing in the proto).
constexpr FieldMetric<PhaseTimes> kPhaseHistograms[] = {
    {"attn_inference_queue_duration_seconds",
     "Time calls answered OK waited in the queue for a worker.", &PhaseTimes::queue_ns},
    {"attn_inference_compute_input_duration_seconds",
     "Host-to-device time (staging and copy) of calls answered OK; 0 on the CPU backend.",
     &PhaseTimes::h2d_ns},
    {"attn_inference_compute_infer_duration_seconds",
     "Kernel time of calls answered OK (CUDA events; wall clock on the CPU backend).",
     &PhaseTimes::kernel_ns},
    {"attn_inference_compute_output_duration_seconds",
     "Device-to-host time (copy and unstaging) of calls answered OK; 0 on the CPU backend.",
     &PhaseTimes::d2h_ns},
    {"attn_inference_request_duration_seconds",
     "Time from arrival to response-ready of calls answered OK.", &PhaseTimes::total_ns},
};

// The gauges that are one field of the LoadSnapshot each.
constexpr FieldMetric<LoadSnapshot> kLoadGauges[] = {
    {"attn_inference_pending_requests",
     "Requests waiting in the queue for a worker (queue depth).", &LoadSnapshot::queued},
    {"attn_stream_buffer_bytes", "Bytes AttendStream calls hold now (--max_stream_buffer_bytes).",
     &LoadSnapshot::stream_buffer_bytes},
    {"attn_stream_buffer_limit_bytes",
     "--max_stream_buffer_bytes: the most AttendStream calls may hold.",
     &LoadSnapshot::stream_buffer_limit_bytes},
    {"attn_admitted_bytes", "Bytes all admitted calls hold now (--max_admitted_bytes).",
     &LoadSnapshot::admitted_bytes},
    {"attn_admitted_limit_bytes", "--max_admitted_bytes: the most all admitted calls may hold.",
     &LoadSnapshot::admitted_limit_bytes},
    {"attn_pinned_heap_bytes",
     "The pinned heap's arena (--pinned_heap_bytes, resolved); 0 when it is off.",
     &LoadSnapshot::pinned_heap_bytes},
    {"attn_pinned_heap_used_bytes", "Bytes the pinned heap's arena holds now.",
     &LoadSnapshot::pinned_heap_used_bytes},
    {"attn_kv_sessions", "KV-cache sessions open now (0 when sessions are off).",
     &LoadSnapshot::sessions},
    {"attn_kv_cache_pages", "Pages of the KV-cache pool (--kv_cache_bytes / --kv_page_bytes).",
     &LoadSnapshot::kv_pages_total},
    {"attn_kv_cache_pages_used", "KV-cache pages sessions hold or have reserved now.",
     &LoadSnapshot::kv_pages_used},
    {"attn_kv_cache_tokens", "Tokens cached now, summed over sessions and layers.",
     &LoadSnapshot::kv_tokens_cached},
};

MetricFamily Gauge(const std::string& name, const std::string& help, double value) {
  MetricFamily family{name, help, MetricType::Gauge, {}};
  ClientMetric metric;
  metric.gauge.value = value;
  family.metric.push_back(std::move(metric));
  return family;
}

// The TCP listener's connections (limits/tcp_acceptor.h): gauges, and the
// refusals as a counter by reason.
void AddConnectionMetrics(const ConnectionCounts& c, std::vector<MetricFamily>* families) {
  families->push_back(Gauge("attn_connections_open",
                            "Client connections open on the TCP listener.",
                            static_cast<double>(c.open)));
  families->push_back(Gauge("attn_connections_limit",
                            "--max_connections: the most client connections open at once.",
                            static_cast<double>(c.limit)));
  MetricFamily refused{"attn_connections_refused_total",
                       "Client connections closed as soon as they were accepted, by reason: "
                       "max_connections (the cap was reached) or no_file_descriptors "
                       "(EMFILE/ENFILE).",
                       MetricType::Counter,
                       {}};
  for (const auto& [reason, count] : {std::pair<const char*, int64_t>{"max_connections",
                                                                      c.refused_over_limit},
                                      {"no_file_descriptors", c.refused_no_fds}}) {
    ClientMetric metric;
    metric.label = {{"reason", reason}};
    metric.counter.value = static_cast<double>(count);
    refused.metric.push_back(std::move(metric));
  }
  families->push_back(std::move(refused));
}

// Counters read from the load snapshot: request batching (--batch_delay_us),
// kept by the scheduler, the pinned heap's overflows, and the KV-cache
// sessions' (the session registry's).
void AddLoadCounters(const LoadSnapshot& load, std::vector<MetricFamily>* families) {
  for (const auto& [name, help, value] :
       {std::tuple<const char*, const char*, int64_t>{
            "attn_batched_launches_total",
            "Kernel launches that stacked two or more requests (--batch_delay_us).",
            load.batched_launches},
        {"attn_batched_requests_total", "Requests that ran in launches stacked with others.",
         load.batched_requests},
        {"attn_pinned_heap_overflows_total",
         "Allocations of 64 KiB and more the pinned heap had no room for (glibc's instead: "
         "request tensors in them are staged).",
         load.pinned_heap_overflows},
        {"attn_session_steps_total", "AttendSessions calls answered OK.", load.session_steps},
        {"attn_session_tokens_appended_total",
         "Tokens appended to KV-cache sessions by AttendSessions calls answered OK.",
         load.session_tokens_appended},
        {"attn_session_forks_total", "Sessions opened by ForkSession.", load.session_forks},
        {"attn_sessions_expired_total",
         "Sessions closed because they were idle for --session_idle_timeout_s.",
         load.sessions_expired},
        {"attn_session_pool_full_total",
         "OpenSession, ForkSession and AttendSessions calls refused (RESOURCE_EXHAUSTED) because "
         "the KV-cache pool had too few free pages.",
         load.rejected_pool_full}}) {
    MetricFamily family{name, help, MetricType::Counter, {}};
    ClientMetric metric;
    metric.counter.value = static_cast<double>(value);
    family.metric.push_back(std::move(metric));
    families->push_back(std::move(family));
  }
}

}  // namespace

PrometheusMetrics::PrometheusMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      success_(CounterFamily(*registry_, "attn_inference_request_success_total",
                             "Attend/AttendStream calls answered OK, by rpc and kernel.")),
      failure_(CounterFamily(*registry_, "attn_inference_request_failure_total",
                             "Attend/AttendStream calls that failed, by rpc, kernel, gRPC status "
                             "code and reason (who ended the call).")),
      bytes_in_(CounterFamily(*registry_, "attn_inference_input_bytes_total",
                              "Bytes of q, k and v in calls answered OK.")
                    .Add({})),
      bytes_out_(CounterFamily(*registry_, "attn_inference_output_bytes_total",
                               "Bytes of out and lse in calls answered OK.")
                     .Add({})) {
  for (const FieldMetric<PhaseTimes>& phase : kPhaseHistograms) {
    phases_.push_back(
        {&prometheus::BuildHistogram().Name(phase.name).Help(phase.help).Register(*registry_),
         phase.field});
  }
}

void PrometheusMetrics::RecordOutcome(const OutcomeSample& s) {
  const std::string kernel = s.kernel.empty() ? kNoKernel : std::string(s.kernel);
  const std::string rpc(s.rpc);
  if (s.code != absl::StatusCode::kOk) {
    failure_
        .Add({{"rpc", rpc},
              {"kernel", kernel},
              {"code", absl::StatusCodeToString(s.code)},
              {"reason", std::string(s.ended_by)}})
        .Increment();
    return;
  }
  success_.Add({{"rpc", rpc}, {"kernel", kernel}}).Increment();
  bytes_in_.Increment(static_cast<double>(s.bytes_in));
  bytes_out_.Increment(static_cast<double>(s.bytes_out));
  const prometheus::Labels by_kernel{{"kernel", kernel}};
  for (const auto& [family, ns] : phases_) {
    family->Add(by_kernel, DurationBuckets()).Observe(static_cast<double>(s.times.*ns) * 1e-9);
  }
}

void PrometheusMetrics::SetLoadSource(std::function<LoadSnapshot()> source) {
  absl::MutexLock lock(&mu_);
  load_source_ = std::move(source);
}

std::vector<MetricFamily> PrometheusMetrics::Collect() const {
  std::vector<MetricFamily> families = registry_->Collect();
  absl::MutexLock lock(&mu_);
  if (!load_source_) return families;
  const LoadSnapshot load = load_source_();
  for (const FieldMetric<LoadSnapshot>& gauge : kLoadGauges) {
    families.push_back(Gauge(gauge.name, gauge.help, static_cast<double>(load.*gauge.field)));
  }
  families.push_back(Gauge("attn_inference_in_flight_requests",
                           "Requests admitted to the scheduler and not yet done: queued and "
                           "running.",
                           static_cast<double>(load.queued + load.running)));
  MetricFamily health{"attn_worker_healthy",
                      "1 while a worker (one per CUDA stream or CPU worker) can run requests, 0 "
                      "once it retired; by worker index and executor.",
                      MetricType::Gauge,
                      {}};
  for (size_t i = 0; i < load.workers.size(); ++i) {
    ClientMetric metric;
    metric.label = {{"executor", load.workers[i].executor}, {"worker", absl::StrCat(i)}};
    metric.gauge.value = load.workers[i].healthy ? 1 : 0;
    health.metric.push_back(std::move(metric));
  }
  families.push_back(std::move(health));
  AddLoadCounters(load, &families);
  AddConnectionMetrics(load.connections, &families);
  return families;
}

std::string PrometheusMetrics::Text() const {
  return prometheus::TextSerializer().Serialize(Collect());
}

}  // namespace attn::server
