#include "latency_plot.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace attn::loadgen {
namespace {

constexpr double kWidth = 960, kHeight = 600;
constexpr double kLeft = 90, kRight = 150, kTop = 90, kBottom = 70;

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

struct Series {
  const char* name;
  const char* color;
  std::function<double(const LevelSummary&)> latency_ms;
};

}  // namespace

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
  const Series series[] = {
      {"p50", "#1f77b4", [](const LevelSummary& s) { return s.latency.p50_ms; }},
      {"p90", "#2ca02c", [](const LevelSummary& s) { return s.latency.p90_ms; }},
      {"p99", "#ff7f0e", [](const LevelSummary& s) { return s.latency.p99_ms; }},
      {"p99.9", "#d62728", [](const LevelSummary& s) { return s.latency.p999_ms; }},
  };

  double x_max = 0, y_min = 0, y_max = 0;
  bool first = true;
  for (const LevelSummary& s : levels) {
    x_max = std::max(x_max, s.throughput_rps);
    for (const Series& line : series) {
      const double y = line.latency_ms(s);
      y_min = first ? y : std::min(y_min, y);
      y_max = first ? y : std::max(y_max, y);
      first = false;
    }
  }
  if (x_max <= 0) x_max = 1;
  if (y_max <= 0) y_max = 1;
  const bool log_y = y_min > 0 && y_max / y_min > 30;
  std::vector<double> x_ticks = LinearTicks(0, x_max * 1.05);
  const double x_hi = std::max(x_ticks.back(), x_max * 1.05);
  std::vector<double> y_ticks;
  double y_lo = 0, y_hi = 0;
  if (log_y) {
    y_lo = std::pow(10.0, std::floor(std::log10(y_min)));
    y_hi = std::pow(10.0, std::ceil(std::log10(y_max)));
    y_ticks = LogTicks(y_lo, y_hi);
  } else {
    y_ticks = LinearTicks(0, y_max * 1.1);
    y_hi = std::max(y_ticks.back(), y_max * 1.1);
  }

  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  auto px = [&](double x) { return kLeft + x / x_hi * plot_w; };
  auto py = [&](double y) {
    const double f = log_y ? (std::log10(std::max(y, y_lo)) - std::log10(y_lo)) /
                                 (std::log10(y_hi) - std::log10(y_lo))
                           : y / y_hi;
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
  for (double t : x_ticks) {
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%.1f\" y1=\"%g\" x2=\"%.1f\" y2=\"%g\" stroke=\"#e5e5e5\"/>\n"
                          "<text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">%s</text>\n",
                          px(t), kTop, px(t), kTop + plot_h, px(t), kTop + plot_h + 18,
                          TickLabel(t));
  }
  if (bytes_per_request > 0) {
    // Top axis: the same throughput in tensor GB/s, at its own round ticks.
    for (double gb : LinearTicks(0, x_hi * bytes_per_request / 1e9)) {
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
      kLeft, kTop, plot_w, plot_h, kLeft + plot_w / 2, kHeight - 24, 24.0, kTop + plot_h / 2,
      log_y ? ", log scale" : "");
  if (bytes_per_request > 0) {
    absl::StrAppendFormat(&svg,
                          "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\" fill=\"#777\">tensor "
                          "GB/s (Q, K, V in + O out)</text>\n",
                          kLeft + plot_w / 2, kTop - 26);
  }

  // One line per percentile, then the level labels above the top line.
  for (const Series& line : series) {
    std::string points;
    for (const LevelSummary& s : levels) {
      absl::StrAppendFormat(&points, "%.1f,%.1f ", px(s.throughput_rps), py(line.latency_ms(s)));
    }
    absl::StrAppendFormat(&svg,
                          "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" "
                          "stroke-width=\"2\"/>\n",
                          points, line.color);
    for (const LevelSummary& s : levels) {
      absl::StrAppendFormat(&svg,
                            "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"><title>%s %s: "
                            "%.3f ms at %.2f req/s</title></circle>\n",
                            px(s.throughput_rps), py(line.latency_ms(s)), line.color,
                            LevelLabel(s), line.name, line.latency_ms(s), s.throughput_rps);
    }
  }
  for (const LevelSummary& s : levels) {
    absl::StrAppendFormat(&svg,
                          "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"11\" "
                          "fill=\"#444\">%s</text>\n",
                          px(s.throughput_rps), std::max(py(series[3].latency_ms(s)) - 9, kTop + 14),
                          Escape(LevelLabel(s)));
  }
  // Legend.
  const double legend_x = kLeft + plot_w + 20;
  for (size_t i = 0; i < 4; ++i) {
    const double y = kTop + 10 + 22 * static_cast<double>(i);
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"%s\" "
                          "stroke-width=\"3\"/>\n<text x=\"%g\" y=\"%g\">%s latency</text>\n",
                          legend_x, y, legend_x + 24, y, series[i].color, legend_x + 30, y + 4,
                          series[i].name);
  }
  if (levels.empty()) {
    absl::StrAppendFormat(&svg,
                          "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\" fill=\"#d62728\">no "
                          "level completed a request</text>\n",
                          kLeft + plot_w / 2, kTop + plot_h / 2);
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace attn::loadgen
