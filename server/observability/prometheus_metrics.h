// server/observability/prometheus_metrics.h
//
// PrometheusMetrics: the server's Prometheus metrics (names, units and
// labels in server/METRICS.md). It is the MetricsSink that RecordOutcome
// feeds (counters and histograms, per call) and a prometheus::Collectable
// that the /metrics endpoint (metrics_endpoint.h) serializes at each scrape,
// adding the gauges it reads then from a load source (Runtime::Load).
//
// Conventions (Prometheus's, with Triton's nv_inference_* family as the
// model for names): base units (seconds, bytes), counters end in _total,
// histograms of successful calls only (a failed call's phases are partial).
// Thread-safe; RecordOutcome takes only the prometheus-cpp families' short
// locks.
#ifndef ATTN_SERVER_OBSERVABILITY_PROMETHEUS_METRICS_H_
#define ATTN_SERVER_OBSERVABILITY_PROMETHEUS_METRICS_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "observability/load_snapshot.h"
#include "observability/metrics_sink.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"

namespace attn::server {

class PrometheusMetrics : public MetricsSink, public prometheus::Collectable {
 public:
  PrometheusMetrics();

  void RecordOutcome(const OutcomeSample& sample) override;

  // Where the gauges come from at each scrape; nullptr: no gauges (before
  // the runtime exists, and after it stops). Returns once no scrape is
  // using the previous source, so the caller may then destroy it.
  void SetLoadSource(std::function<LoadSnapshot()> source);

  std::vector<prometheus::MetricFamily> Collect() const override;

  // Collect() in the text exposition format (what GET /metrics returns).
  std::string Text() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& success_;
  prometheus::Family<prometheus::Counter>& failure_;
  prometheus::Counter& bytes_in_;
  prometheus::Counter& bytes_out_;
  // Each duration histogram with the phase time it observes.
  std::vector<std::pair<prometheus::Family<prometheus::Histogram>*, int64_t PhaseTimes::*>> phases_;

  mutable absl::Mutex mu_;
  std::function<LoadSnapshot()> load_source_ ABSL_GUARDED_BY(mu_);
};

}  // namespace attn::server

#endif  // ATTN_SERVER_OBSERVABILITY_PROMETHEUS_METRICS_H_
