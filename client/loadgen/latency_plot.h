// The sweep's picture: latency percentiles (p50, p90, p99, p99.9) against
// throughput, one line per percentile through the levels in sweep order,
// each level labelled (c=8, r=100/s, with its failure rate when some
// failed), and below it every level's failed requests (% of sent, by
// code), as an SVG document written directly (no plotting dependency).
// Both axes span the data (DataAxis); the latency axis turns logarithmic
// when the values span more than a factor of 30; a top axis gives tensor
// GB/s. Lines are drawn highest percentile first, wider and dashed or with
// their own markers, so equal percentiles do not hide one another.
#ifndef ATTN_CLIENT_LOADGEN_LATENCY_PLOT_H_
#define ATTN_CLIENT_LOADGEN_LATENCY_PLOT_H_

#include <string>
#include <vector>

#include "level_summary.h"

namespace attn::loadgen {

// Levels without completed requests are left out of the latency plot (not
// of the failure strip). `bytes_per_request` (Q + K + V + O) scales the GB/s
// axis; 0 omits it.
std::string RenderLatencyPlot(const std::string& title, const std::string& subtitle,
                              const std::vector<LevelSummary>& levels, double bytes_per_request);

// Tick positions for [lo, hi]: 1-2-5 steps on a linear axis, or 1-2-5 per
// decade on a log axis (lo > 0). Exposed for tests.
std::vector<double> LinearTicks(double lo, double hi);
std::vector<double> LogTicks(double lo, double hi);

// A linear axis around values in [lo, hi]: 5 % of the span added on each
// side (never below 0), widened to round ticks; one value gets +-10 %.
struct Axis {
  double lo = 0, hi = 1;
  std::vector<double> ticks;
};
Axis DataAxis(double lo, double hi);

}  // namespace attn::loadgen

#endif  // ATTN_CLIENT_LOADGEN_LATENCY_PLOT_H_
