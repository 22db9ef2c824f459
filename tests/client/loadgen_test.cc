// attn_loadgen's pieces that need no server: sweep specs, arrival
// schedules, percentiles and level accounting, and the report formats.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "arrival_schedule.h"
#include "attn/client/attend_types.h"
#include "gtest/gtest.h"
#include "json_writer.h"
#include "latency_plot.h"
#include "level_summary.h"
#include "nlohmann/json.hpp"
#include "report_writers.h"
#include "sweep_spec.h"

namespace attn::loadgen {
namespace {

TEST(SweepSpecTest, ValuesListsAndRanges) {
  EXPECT_EQ(*ParseIntegerSweep("8"), (std::vector<int>{8}));
  EXPECT_EQ(*ParseIntegerSweep("1,2,4, 8"), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(*ParseIntegerSweep("1:64:x2"), (std::vector<int>{1, 2, 4, 8, 16, 32, 64}));
  EXPECT_EQ(*ParseIntegerSweep("1:50:x2"), (std::vector<int>{1, 2, 4, 8, 16, 32}));
  EXPECT_EQ(*ParseIntegerSweep("4:16:4"), (std::vector<int>{4, 8, 12, 16}));
  EXPECT_EQ(*ParseIntegerSweep("4:16:+6"), (std::vector<int>{4, 10, 16}));
  const std::vector<double> rates = *ParseSweep("0.5:1.5:0.5");
  ASSERT_EQ(rates.size(), 3u);
  EXPECT_DOUBLE_EQ(rates[2], 1.5);
}

TEST(SweepSpecTest, RejectsBadSpecs) {
  for (const char* bad :
       {"", "0", "-1", "a", "1:", "1:8", "8:1:1", "1:8:x1", "1:8:0", "1:8:x", "1:2:3:4", "1,,2"}) {
    EXPECT_FALSE(ParseSweep(bad).ok()) << "'" << bad << "'";
  }
  EXPECT_FALSE(ParseIntegerSweep("1.5").ok());
  EXPECT_FALSE(ParseSweep("1:100000:1").ok());  // too many levels
}

TEST(ArrivalScheduleTest, ConstantGapsAreExact) {
  ArrivalSchedule schedule(Arrivals::kConstant, 3.0, 1);
  EXPECT_EQ(schedule.Next(), 0);
  EXPECT_EQ(schedule.Next(), 333333333);
  EXPECT_EQ(schedule.Next(), 666666667);
  EXPECT_EQ(schedule.Next(), 1000000000);
}

TEST(ArrivalScheduleTest, PoissonHasTheRequestedMeanRateAndIsSeeded) {
  ArrivalSchedule a(Arrivals::kPoisson, 1000.0, 7), b(Arrivals::kPoisson, 1000.0, 7);
  int64_t last = 0;
  constexpr int kArrivals = 20000;
  for (int i = 0; i < kArrivals; ++i) {
    const int64_t t = a.Next();
    ASSERT_GE(t, last);
    ASSERT_EQ(t, b.Next());
    last = t;
  }
  // Mean gap 1 ms; the mean of 20000 exponential gaps is within 3% of it
  // with overwhelming probability (standard error 0.7%).
  const double mean_gap_ms = static_cast<double>(last) / (kArrivals - 1) / 1e6;
  EXPECT_NEAR(mean_gap_ms, 1.0, 0.03);
}

TEST(PercentileTest, NearestRank) {
  std::vector<int64_t> v;
  for (int i = 1; i <= 1000; ++i) v.push_back(i);
  EXPECT_EQ(Percentile(v, 50), 500);
  EXPECT_EQ(Percentile(v, 99), 990);
  EXPECT_EQ(Percentile(v, 99.9), 999);
  EXPECT_EQ(Percentile(v, 100), 1000);
  EXPECT_EQ(Percentile(v, 0), 1);
  EXPECT_EQ(Percentile({7}, 99.9), 7);
  EXPECT_EQ(Percentile({}, 50), 0);
  const LatencyStats stats = ComputeLatencyStats({4000000, 1000000, 3000000, 2000000});
  EXPECT_DOUBLE_EQ(stats.mean_ms, 2.5);
  EXPECT_DOUBLE_EQ(stats.p50_ms, 2.0);
  EXPECT_DOUBLE_EQ(stats.max_ms, 4.0);
  EXPECT_DOUBLE_EQ(stats.min_ms, 1.0);
  EXPECT_NEAR(stats.stddev_ms, std::sqrt(1.25), 1e-12);
}

LevelRun SyntheticOpenLoopRun() {
  LevelRun run;
  run.spec.mode = LoadMode::kOpenLoop;
  run.spec.rate = 100;
  run.spec.late_tolerance = absl::Milliseconds(1);
  run.window_start_ns = 1'000'000'000;
  run.send_stop_ns = 2'000'000'000;
  // 10 requests due every 100 ms from the window's start; #3 sent 5 ms late;
  // #7 failed with UNAVAILABLE. Each takes 10 ms after sending.
  for (int i = 0; i < 10; ++i) {
    RequestRecord r;
    r.due_ns = run.window_start_ns + i * 100'000'000LL;
    r.sent_ns = r.due_ns + (i == 3 ? 5'000'000 : 100'000);
    r.done_ns = r.sent_ns + 10'000'000;
    r.code = i == 7 ? absl::StatusCode::kUnavailable : absl::StatusCode::kOk;
    r.server.kernel_ns = 2'000'000;
    r.server.total_ns = 4'000'000;
    r.client.round_trip_ns = 10'000'000;
    r.client.marshal_ns = 1'000'000;
    run.records.push_back(r);
  }
  run.unsent_requests = 2;
  return run;
}

TEST(SummarizeTest, AccountingLatencyAndThroughput) {
  const Shape shape{1, 128, 2, 64};
  const LevelSummary s = Summarize(SyntheticOpenLoopRun(), shape);
  EXPECT_EQ(s.sent, 10);
  EXPECT_EQ(s.completed, 9);
  EXPECT_EQ(s.failed, 1);
  EXPECT_EQ(s.completed + s.failed, s.sent);
  EXPECT_EQ(s.errors.at("UNAVAILABLE"), 1);
  EXPECT_EQ(s.unsent, 2);
  EXPECT_EQ(s.late, 1);
  EXPECT_DOUBLE_EQ(s.late_percent, 10.0);
  // Latency from the due time: 10.1 ms, and 15 ms for the late one.
  EXPECT_NEAR(s.latency.p50_ms, 10.1, 1e-9);
  EXPECT_NEAR(s.latency.max_ms, 15.0, 1e-9);
  EXPECT_NEAR(s.service_latency.max_ms, 10.0, 1e-9);
  // Window: from its start to the last completion, 900.1 + 10 ms.
  EXPECT_NEAR(s.window_s, 0.9101, 1e-9);
  EXPECT_NEAR(s.throughput_rps, 9 / 0.9101, 1e-9);
  EXPECT_NEAR(s.tensor_gbps, s.throughput_rps * 4 * shape.NumElements() * 2 / 1e9, 1e-12);
  EXPECT_NEAR(s.tflops, s.throughput_rps * 4.0 * 128 * 128 * 2 * 64 / 1e12, 1e-15);
  EXPECT_NEAR(s.phases.server_kernel_ms, 2.0, 1e-9);
  EXPECT_NEAR(s.phases.server_other_ms, 2.0, 1e-9);
  EXPECT_NEAR(s.phases.network_ms, 5.0, 1e-9);  // 10 − 1 marshal − 4 server total
  EXPECT_EQ(LevelLabel(s), "r=100/s");
  EXPECT_FALSE(s.server_stats.available);
}

TEST(ReportTest, CsvHasOneRowPerLevelAndConsistentColumns) {
  const LevelSummary s = Summarize(SyntheticOpenLoopRun(), Shape{1, 128, 2, 64});
  const std::string csv = FormatCsv({s, s});
  const std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u);
  const size_t columns = std::vector<std::string>(absl::StrSplit(lines[0], ',')).size();
  for (const std::string& line : lines) {
    EXPECT_EQ(std::vector<std::string>(absl::StrSplit(line, ',')).size(), columns) << line;
  }
  EXPECT_TRUE(absl::StartsWith(lines[0], "mode,concurrency,target_rate_rps,sent,completed"));
  EXPECT_TRUE(absl::StrContains(lines[1], "UNAVAILABLE=1"));
}

TEST(JsonWriterTest, EscapesAndNests) {
  JsonWriter json;
  json.BeginObject();
  json.Field("text", "a\"b\\c\nd\x01");
  json.Field("nan", std::nan(""));
  json.Field("n", int64_t{42});
  json.Key("list").BeginArray();
  json.Number(0.5);
  json.Bool(true);
  json.Null();
  json.EndArray();
  json.Key("empty").BeginObject();
  json.EndObject();
  json.EndObject();
  EXPECT_EQ(json.str(),
            "{\n  \"text\": \"a\\\"b\\\\c\\nd\\u0001\",\n  \"nan\": null,\n  \"n\": 42,\n"
            "  \"list\": [\n    0.5,\n    true,\n    null\n  ],\n  \"empty\": {}\n}\n");
}

// A --label (or any text) that is not UTF-8 still gives valid JSON: the
// bad bytes become U+FFFD.
TEST(JsonWriterTest, TextThatIsNotUtf8BecomesValidJson) {
  const std::string latin1_label = "caf\xe9 \xff\xfe ok";
  JsonWriter json;
  json.BeginObject();
  json.Field("label", latin1_label);
  json.EndObject();
  const nlohmann::json parsed = nlohmann::json::parse(json.str());  // throws if invalid
  const std::string label = parsed.at("label").get<std::string>();
  EXPECT_TRUE(absl::StrContains(label, "caf\xef\xbf\xbd")) << label;
  EXPECT_TRUE(absl::EndsWith(label, " ok")) << label;

  SweepContext context;
  context.shape = Shape{1, 128, 2, 64};
  context.label = latin1_label;
  const LevelRun run = SyntheticOpenLoopRun();
  context.spec = run.spec;
  const std::string report = FormatJson(context, {Summarize(run, context.shape)}, nullptr);
  EXPECT_NO_THROW(nlohmann::json::parse(report)) << report;
}

TEST(ReportTest, JsonCarriesEveryLevelAndOptionalRequests) {
  const LevelRun run = SyntheticOpenLoopRun();
  const LevelSummary s = Summarize(run, Shape{1, 128, 2, 64});
  SweepContext context;
  context.shape = Shape{1, 128, 2, 64};
  context.spec = run.spec;
  const std::vector<LevelRun> runs = {run};
  const std::string with = FormatJson(context, {s}, &runs);
  const std::string without = FormatJson(context, {s}, nullptr);
  EXPECT_TRUE(absl::StrContains(with, "\"requests\": ["));
  EXPECT_FALSE(absl::StrContains(without, "\"requests\""));
  EXPECT_TRUE(absl::StrContains(without, "\"p99.9\": "));
  EXPECT_TRUE(absl::StrContains(without, "\"UNAVAILABLE\": 1"));
}

TEST(ReportTest, CostAndJsonFollowTheProblem) {
  // GQA with causal masking over Sq = 4 queries and Sk = 6 keys: query i sees
  // i + 3 keys (bottom-right aligned), 3 + 4 + 5 + 6 = 18 pairs per sequence.
  AttentionInputs geometry;
  geometry.dtype = DType::kFloat16;
  geometry.shape = Shape{2, 4, 4, 8};
  geometry.kv_seq_len = 6;
  geometry.kv_num_heads = 2;
  const AttentionInputs inputs = MakeRandomInputs(geometry, 1);
  AttendOptions call;
  call.causal = true;
  call.return_lse = true;
  const RequestCost cost = RequestCost::Of(inputs, call);
  EXPECT_DOUBLE_EQ(cost.flops, 4.0 * 8 * 4 * 2 * 18);
  EXPECT_DOUBLE_EQ(cost.flops, inputs.Problem(call).Flops());
  EXPECT_DOUBLE_EQ(cost.tensor_bytes,
                   2.0 * (2 * 4 * 4 * 8) * 2 + 2.0 * 2 * (2 * 6 * 2 * 8) + 4.0 * 2 * 4 * 4);
  EXPECT_DOUBLE_EQ(RequestCost::SelfAttention({1, 128, 2, 64}).flops, 4.0 * 2 * 128 * 128 * 64);

  const LevelRun run = SyntheticOpenLoopRun();
  const LevelSummary dense = Summarize(run, RequestCost::Of(inputs, AttendOptions()));
  const LevelSummary s = Summarize(run, cost);
  EXPECT_NEAR(s.tflops, s.throughput_rps * cost.flops / 1e12, 1e-15);
  EXPECT_NEAR(s.tflops / dense.tflops, 18.0 / 24.0, 1e-12);  // masked pairs are not credited
  SweepContext context;
  context.shape = geometry.shape;
  context.problem = inputs.Problem(call);
  context.cost = cost;
  context.spec = run.spec;
  const std::string json = FormatJson(context, {s}, nullptr);
  for (const char* text : {"\"kv_seq_len\": 6", "\"kv_num_heads\": 2", "\"causal\": true",
                           "\"return_lse\": true", "\"window_left\": -1", "\"varlen\": false"}) {
    EXPECT_TRUE(absl::StrContains(json, text)) << text << "\n" << json;
  }
  EXPECT_TRUE(absl::StrContains(Headline(context), "causal")) << Headline(context);
}

size_t CountOccurrences(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

void ExpectNear(const std::vector<double>& actual, const std::vector<double>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) EXPECT_NEAR(actual[i], expected[i], 1e-12) << i;
}

TEST(LatencyPlotTest, TicksAreRoundAndCoverTheRange) {
  ExpectNear(LinearTicks(0, 10), {0, 2, 4, 6, 8, 10});
  ExpectNear(LinearTicks(0, 0.35), {0, 0.1, 0.2, 0.3});
  ExpectNear(LinearTicks(3, 70), {20, 40, 60});
  ExpectNear(LogTicks(0.1, 10), {0.1, 0.2, 0.5, 1, 2, 5, 10});
  ExpectNear(LogTicks(1, 100), {1, 2, 5, 10, 20, 50, 100});
}

TEST(LatencyPlotTest, SvgNamesEveryLevelAndPercentile) {
  LevelRun run = SyntheticOpenLoopRun();
  const LevelSummary a = Summarize(run, Shape{1, 128, 2, 64});
  run.spec.rate = 200;
  const LevelSummary b = Summarize(run, Shape{1, 128, 2, 64});
  const std::string svg = RenderLatencyPlot("title <&>", "sub", {a, b}, 1e6);
  EXPECT_TRUE(absl::StartsWith(svg, "<svg "));
  EXPECT_TRUE(absl::EndsWith(svg, "</svg>\n"));
  EXPECT_TRUE(absl::StrContains(svg, "title &lt;&amp;&gt;"));
  for (const char* text : {"r=100/s", "r=200/s", "p50 latency", "p99.9 latency", "GB/s"}) {
    EXPECT_TRUE(absl::StrContains(svg, text)) << text;
  }
  EXPECT_TRUE(absl::StrContains(RenderLatencyPlot("t", "s", {}, 0), "no level completed"));
}

TEST(LatencyPlotTest, AxesSpanTheDataNotZeroToTheLargest) {
  Axis x = DataAxis(900, 1000);
  EXPECT_GT(x.lo, 800);
  EXPECT_LE(x.lo, 900 - 5);  // room on each side of the points
  EXPECT_GE(x.hi, 1000 + 5);
  EXPECT_LT(x.hi, 1100);
  ASSERT_FALSE(x.ticks.empty());
  EXPECT_GE(x.ticks.front(), x.lo);
  EXPECT_LE(x.ticks.back(), x.hi);
  x = DataAxis(3, 3);  // one level
  EXPECT_LT(x.lo, 3);
  EXPECT_GT(x.hi, 3);
  EXPECT_EQ(DataAxis(0.5, 40).lo, 0);  // never below zero
}

// Two closed-loop levels near 1000 requests/s whose p99 equals p99.9 (fewer
// than 1000 requests), and a third whose every request was refused.
std::vector<LevelSummary> SaturatedSweep() {
  std::vector<LevelSummary> levels(3);
  for (int i = 0; i < 3; ++i) {
    LevelSummary& s = levels[static_cast<size_t>(i)];
    s.concurrency = 16 << i;
    s.sent = 500;
    s.completed = i < 2 ? 500 - 25 * i : 0;
    s.failed = s.sent - s.completed;
    if (s.failed > 0) s.errors["RESOURCE_EXHAUSTED"] = s.failed;
    s.throughput_rps = i < 2 ? 950 + 40 * i : 0;
    s.latency.p50_ms = 10 + i;
    s.latency.p90_ms = 12 + i;
    s.latency.p99_ms = s.latency.p999_ms = 20 + i;
  }
  return levels;
}

TEST(LatencyPlotTest, ClosedLoopPointsAreNotPressedAgainstAnEdge) {
  const std::string svg = RenderLatencyPlot("t", "s", SaturatedSweep(), 0);
  // The throughput ticks start near the data, not at 0.
  const size_t tick = svg.find("class=\"x-tick\"");
  ASSERT_NE(tick, std::string::npos);
  const size_t label = svg.find('>', tick) + 1;
  double first_tick = 0;
  ASSERT_TRUE(absl::SimpleAtod(svg.substr(label, svg.find('<', label) - label), &first_tick));
  EXPECT_GT(first_tick, 800) << svg;
}

TEST(LatencyPlotTest, AHigherPercentileIsDrawnUnderAndWiderSoAnEqualOneStaysVisible) {
  const std::string svg = RenderLatencyPlot("t", "s", SaturatedSweep(), 0);
  const size_t p999 = svg.find("data-series=\"p99.9\"");
  const size_t p99 = svg.find("data-series=\"p99\"");
  ASSERT_NE(p999, std::string::npos);
  ASSERT_NE(p99, std::string::npos);
  EXPECT_LT(p999, p99) << "p99.9 must be drawn first, beneath p99";
  auto width = [&svg](size_t at) {
    const size_t w = svg.find("stroke-width=\"", at) + 14;
    double value = 0;
    EXPECT_TRUE(absl::SimpleAtod(svg.substr(w, svg.find('"', w) - w), &value));
    return value;
  };
  EXPECT_GT(width(p999), width(p99));
  const std::string p999_line = svg.substr(p999, svg.find("/>", p999) - p999);
  EXPECT_TRUE(absl::StrContains(p999_line, "stroke-dasharray")) << p999_line;
}

TEST(LatencyPlotTest, FailedRequestsAppearPerLevelEvenWhereNoneCompleted) {
  const std::string svg = RenderLatencyPlot("t", "s", SaturatedSweep(), 0);
  EXPECT_TRUE(absl::StrContains(svg, "failed requests per level")) << svg;
  EXPECT_EQ(CountOccurrences(svg, "class=\"failure-bar\""), 3) << svg;
  for (const char* text : {"c=16: 0 of 500 failed", "c=32: 25 of 500 failed (RESOURCE_EXHAUSTED 25)",
                           "c=64: 500 of 500 failed (RESOURCE_EXHAUSTED 500)", ">100.0%<", ">5.0%<",
                           "c=32 (5.0% failed)"}) {
    EXPECT_TRUE(absl::StrContains(svg, text)) << text << "\n" << svg;
  }
}

}  // namespace
}  // namespace attn::loadgen
