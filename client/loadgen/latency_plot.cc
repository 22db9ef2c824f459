#include "latency_plot.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace attn::loadgen {
namespace {

constexpr double kWidth = 960, kHeight = 760;
constexpr double kLeft = 90, kRight = 150, kTop = 90;
// The latency plot's bottom edge, then the failure strip below it.
constexpr double kPlotBottom = 530;
constexpr double kStripTop = 600, kStripBottom = 700;

// A "nice" step near `raw`: 1, 2 or 5 times a power of ten.
double NiceStep(double raw) {
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * magnitude) return m * magnitude;
  }
  return 10 * magnitude;
}

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string TickLabel(double v) { return absl::StrFormat("%g", v); }

// One percentile's line. Lines are drawn from the highest percentile down,
// each wider than the next and with a marker of its own, so a percentile
// that equals the one above it (p99 and p99.9 below 1000 requests) still
// shows around it instead of hiding under it.
struct Series {
  const char* name;
  const char* color;
  double width;
  const char* dash;  // stroke-dasharray, "" for solid
  std::function<double(const LevelSummary&)> latency_ms;
};

// The stroke attributes of a line of `line`, at most `max_width` wide.
std::string Stroke(const Series& line, double max_width) {
  return absl::StrFormat(" stroke=\"%s\" stroke-width=\"%g\"%s", line.color,
                         std::min(line.width, max_width),
                         *line.dash ? absl::StrFormat(" stroke-dasharray=\"%s\"", line.dash) : "");
}

// A marker of shape `index` (circle, square, triangle, diamond) at (x, y),
// with `title` as its tooltip (none when empty).
std::string Marker(size_t index, double x, double y, const char* color, const std::string& title) {
  const std::string tip = title.empty() ? "" : absl::StrCat("<title>", Escape(title), "</title>");
  switch (index % 4) {
    case 0:
      return absl::StrFormat("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\">%s</circle>",
                             x, y, color, tip);
    case 1:
      return absl::StrFormat(
          "<rect x=\"%.1f\" y=\"%.1f\" width=\"7\" height=\"7\" fill=\"%s\">%s</rect>", x - 3.5,
          y - 3.5, color, tip);
    case 2:
      return absl::StrFormat(
          "<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\" fill=\"%s\">%s</polygon>", x, y - 5,
          x - 4.5, y + 4, x + 4.5, y + 4, color, tip);
    default:
      return absl::StrFormat(
          "<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f\" fill=\"%s\">%s</polygon>",
          x, y - 5.5, x + 5.5, y, x, y + 5.5, x - 5.5, y, color, tip);
  }
}

// Failed over sent, in percent (0 for a level that sent nothing).
double FailurePercent(const LevelSummary& s) {
  return s.sent > 0 ? 100.0 * static_cast<double>(s.failed) / static_cast<double>(s.sent) : 0.0;
}

// "RESOURCE_EXHAUSTED 12, UNAVAILABLE 1": the failures by code, most first.
std::string ErrorCounts(const LevelSummary& s) {
  std::vector<std::pair<std::string, int64_t>> codes(s.errors.begin(), s.errors.end());
  std::stable_sort(codes.begin(), codes.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string out;
  for (const auto& [code, count] : codes) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", code, " ", count);
  }
  return out;
}

}  // namespace

Axis DataAxis(double lo, double hi) {
  if (!(hi > lo)) {
    // One value (or none): a window around it.
    const double half = lo > 0 ? lo * 0.1 : 0.5;
    lo -= half;
    hi += half;
  }
  const double pad = (hi - lo) * 0.05;
  lo = std::max(0.0, lo - pad);
  hi += pad;
  const double step = NiceStep((hi - lo) / 6);
  Axis axis;
  axis.lo = std::floor(lo / step) * step;
  axis.hi = std::ceil(hi / step) * step;
  axis.ticks = LinearTicks(axis.lo, axis.hi);
  return axis;
}

std::vector<double> LinearTicks(double lo, double hi) {
  std::vector<double> ticks;
  if (!(hi > lo)) return {lo};
  const double step = NiceStep((hi - lo) / 6);
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  }
  return ticks;
}

std::vector<double> LogTicks(double lo, double hi) {
  std::vector<double> ticks;
  for (double decade = std::pow(10.0, std::floor(std::log10(lo))); decade <= hi * 1.000001;
       decade *= 10) {
    for (double m : {1.0, 2.0, 5.0}) {
      const double t = m * decade;
      if (t >= lo * 0.999999 && t <= hi * 1.000001) ticks.push_back(t);
    }
  }
  return ticks;
}

std::string RenderLatencyPlot(const std::string& title, const std::string& subtitle,
                              const std::vector<LevelSummary>& all_levels,
                              double bytes_per_request) {
  std::vector<LevelSummary> levels;
  for (const LevelSummary& s : all_levels) {
    if (s.completed > 0) levels.push_back(s);
  }
  // Highest percentile first: see Series.
  const Series series[] = {
      {"p99.9", "#d62728", 7, "6 3", [](const LevelSummary& s) { return s.latency.p999_ms; }},
      {"p99", "#ff7f0e", 5, "", [](const LevelSummary& s) { return s.latency.p99_ms; }},
      {"p90", "#2ca02c", 3.5, "", [](const LevelSummary& s) { return s.latency.p90_ms; }},
      {"p50", "#1f77b4", 2, "", [](const LevelSummary& s) { return s.latency.p50_ms; }},
  };

  // Both axes span the data, not zero to the largest value: closed-loop
  // levels sit close together at high throughput.
  double x_min = 0, x_max = 0, y_min = 0, y_max = 0;
  bool first = true;
  for (const LevelSummary& s : levels) {
    x_min = first ? s.throughput_rps : std::min(x_min, s.throughput_rps);
    x_max = first ? s.throughput_rps : std::max(x_max, s.throughput_rps);
    for (const Series& line : series) {
      const double y = line.latency_ms(s);
      y_min = first ? y : std::min(y_min, y);
      y_max = first ? y : std::max(y_max, y);
      first = false;
    }
  }
  if (levels.empty()) x_max = y_max = 1;
  const bool log_y = y_min > 0 && y_max / y_min > 30;
  const Axis x_axis = DataAxis(x_min, x_max);
  std::vector<double> y_ticks;
  double y_lo = 0, y_hi = 0;
  if (log_y) {
    y_lo = std::pow(10.0, std::floor(std::log10(y_min)));
    y_hi = std::pow(10.0, std::ceil(std::log10(y_max)));
    y_ticks = LogTicks(y_lo, y_hi);
  } else {
    const Axis y_axis = DataAxis(y_min, y_max);
    y_lo = y_axis.lo;
    y_hi = y_axis.hi;
    y_ticks = y_axis.ticks;
  }

  const double plot_w = kWidth - kLeft - kRight, plot_h = kPlotBottom - kTop;
  auto px = [&](double x) { return kLeft + (x - x_axis.lo) / (x_axis.hi - x_axis.lo) * plot_w; };
  auto py = [&](double y) {
    const double f = log_y ? (std::log10(std::max(y, y_lo)) - std::log10(y_lo)) /
                                 (std::log10(y_hi) - std::log10(y_lo))
                           : (y - y_lo) / (y_hi - y_lo);
    return kTop + plot_h * (1 - f);
  };

  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" viewBox=\"0 0 %g "
      "%g\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
      kWidth, kHeight, kWidth, kHeight);
  absl::StrAppendFormat(&svg,
                        "<text x=\"%g\" y=\"24\" font-size=\"16\" font-weight=\"bold\">%s</text>\n"
                        "<text x=\"%g\" y=\"44\" fill=\"#555\">%s</text>\n",
                        kLeft, Escape(title), kLeft, Escape(subtitle));
  // Grid, ticks and axis labels.
  for (double t : x_axis.ticks) {
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%.1f\" y1=\"%g\" x2=\"%.1f\" y2=\"%g\" stroke=\"#e5e5e5\"/>\n"
                          "<text class=\"x-tick\" x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">%s"
                          "</text>\n",
                          px(t), kTop, px(t), kTop + plot_h, px(t), kTop + plot_h + 18,
                          TickLabel(t));
  }
  if (bytes_per_request > 0) {
    // Top axis: the same throughput in tensor GB/s, at its own round ticks.
    for (double gb : LinearTicks(x_axis.lo * bytes_per_request / 1e9,
                                 x_axis.hi * bytes_per_request / 1e9)) {
      const double x = px(gb * 1e9 / bytes_per_request);
      absl::StrAppendFormat(&svg,
                            "<line x1=\"%.1f\" y1=\"%g\" x2=\"%.1f\" y2=\"%g\" stroke=\"#777\"/>\n"
                            "<text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\" fill=\"#777\">%s"
                            "</text>\n",
                            x, kTop - 4, x, kTop, x, kTop - 8, TickLabel(gb));
    }
  }
  for (double t : y_ticks) {
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%g\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>\n"
                          "<text x=\"%g\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                          kLeft, py(t), kLeft + plot_w, py(t), kLeft - 8, py(t) + 4,
                          TickLabel(t));
  }
  absl::StrAppendFormat(
      &svg,
      "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" stroke=\"#333\"/>\n"
      "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">throughput (requests/s)</text>\n"
      "<text transform=\"translate(%g,%g) rotate(-90)\" text-anchor=\"middle\">latency (ms%s)"
      "</text>\n",
      kLeft, kTop, plot_w, plot_h, kLeft + plot_w / 2, kTop + plot_h + 40, 24.0,
      kTop + plot_h / 2, log_y ? ", log scale" : "");
  if (bytes_per_request > 0) {
    absl::StrAppendFormat(&svg,
                          "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\" fill=\"#777\">tensor "
                          "GB/s (Q, K, V in + O out)</text>\n",
                          kLeft + plot_w / 2, kTop - 26);
  }

  // One line per percentile, then the level labels above the top line.
  for (size_t i = 0; i < std::size(series); ++i) {
    const Series& line = series[i];
    std::string points;
    for (const LevelSummary& s : levels) {
      absl::StrAppendFormat(&points, "%.1f,%.1f ", px(s.throughput_rps), py(line.latency_ms(s)));
    }
    absl::StrAppendFormat(&svg,
                          "<polyline class=\"series\" data-series=\"%s\" points=\"%s\" "
                          "fill=\"none\" stroke-opacity=\"0.8\"%s/>\n",
                          line.name, points, Stroke(line, line.width));
    for (const LevelSummary& s : levels) {
      const double latency = line.latency_ms(s);
      svg += Marker(i, px(s.throughput_rps), py(latency), line.color,
                    absl::StrFormat("%s %s: %.3f ms at %.2f req/s", LevelLabel(s), line.name,
                                    latency, s.throughput_rps)) +
             "\n";
    }
  }
  for (const LevelSummary& s : levels) {
    const std::string label =
        s.failed > 0 ? absl::StrFormat("%s (%.1f%% failed)", LevelLabel(s), FailurePercent(s))
                     : LevelLabel(s);
    absl::StrAppendFormat(&svg,
                          "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"11\" "
                          "fill=\"%s\">%s</text>\n",
                          px(s.throughput_rps),
                          std::max(py(series[0].latency_ms(s)) - 9, kTop + 14),
                          s.failed > 0 ? "#d62728" : "#444", Escape(label));
  }
  // Legend.
  const double legend_x = kLeft + plot_w + 20;
  for (size_t i = 0; i < std::size(series); ++i) {
    const double y = kTop + 10 + 22 * static_cast<double>(i);
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\"%s/>\n%s\n<text x=\"%g\" "
                          "y=\"%g\">%s latency</text>\n",
                          legend_x, y, legend_x + 24, y, Stroke(series[i], 4),
                          Marker(i, legend_x + 12, y, series[i].color, ""), legend_x + 30, y + 4,
                          series[i].name);
  }
  if (levels.empty()) {
    absl::StrAppendFormat(&svg,
                          "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\" fill=\"#d62728\">no "
                          "level completed a request</text>\n",
                          kLeft + plot_w / 2, kTop + plot_h / 2);
  }

  // The failure strip: every level of the sweep in order, completed or not,
  // with the share of its sent requests that failed and their codes.
  const double strip_h = kStripBottom - kStripTop;
  absl::StrAppendFormat(
      &svg,
      "<text x=\"%g\" y=\"%g\">failed requests per level (%% of sent), in sweep order</text>\n"
      "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" stroke=\"#333\"/>\n",
      kLeft, kStripTop - 8, kLeft, kStripTop, plot_w, strip_h);
  const double slot = all_levels.empty() ? plot_w : plot_w / static_cast<double>(all_levels.size());
  for (size_t i = 0; i < all_levels.size(); ++i) {
    const LevelSummary& s = all_levels[i];
    const double percent = FailurePercent(s);
    const double x = kLeft + slot * (static_cast<double>(i) + 0.5);
    const double bar_h = (strip_h - 16) * percent / 100.0;
    std::string detail = ErrorCounts(s);
    absl::StrAppendFormat(
        &svg,
        "<rect class=\"failure-bar\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
        "fill=\"#d62728\"><title>%s: %d of %d failed%s</title></rect>\n"
        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"11\">%.1f%%</text>\n"
        "<text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\" font-size=\"11\">%s</text>\n",
        x - std::min(slot * 0.3, 20.0), kStripBottom - bar_h, 2 * std::min(slot * 0.3, 20.0),
        bar_h, Escape(LevelLabel(s)), s.failed, s.sent,
        detail.empty() ? "" : absl::StrCat(" (", Escape(detail), ")"), x,
        std::max(kStripBottom - bar_h - 4, kStripTop + 12), percent, x, kStripBottom + 16,
        Escape(LevelLabel(s)));
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace attn::loadgen
