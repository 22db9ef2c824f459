// attn_tune: ladder step 7, auto-tuning. Times every k07 tuning candidate on
// this GPU over a sweep of sequence lengths and both dtypes, ranks them by
// the harmonic mean of TFLOP/s (the seed's summary statistic), and, with
// --write, records the winner for this device in a tuning table
// (attn/tuning.h) — kernels/tuning/tuned_configs.tsv to build it in, or any
// file named by $ATTN_TUNING_TABLE at run time.
//
//   attn_tune --write=kernels/tuning/tuned_configs.tsv
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "attn/attention.h"
#include "attn/command_line.h"
#include "attn/device.h"
#include "attn/ladder.h"
#include "attn/tuning.h"
#include "bench_flags.h"
#include "kernel_timer.h"

ABSL_FLAG(std::string, seq_lens, "1024,2048,4096,8192,16384", "sequence lengths of the sweep");
ABSL_FLAG(std::string, dtypes, "bf16,fp16", "dtypes of the sweep");
ABSL_FLAG(int64_t, tokens, 16384, "batch = tokens / seq_len");
ABSL_FLAG(int64_t, heads, 16, "number of heads");
ABSL_FLAG(int, step, 7, "the ladder step whose candidates to time (their names start kNN/)");
ABSL_FLAG(int, warmup, 5, "untimed launches per point");
ABSL_FLAG(int, iters, 30, "timed launches per point (median)");
ABSL_FLAG(std::string, write, "", "tuning table to update with this device's winner");

namespace attn::bench {
namespace {

absl::Status WriteWinner(const std::string& path, const TuningEntry& winner) {
  std::vector<TuningEntry> entries;
  if (std::ifstream in(path); in) {
    std::stringstream text;
    text << in.rdbuf();
    absl::StatusOr<std::vector<TuningEntry>> parsed = ParseTuningTable(text.str());
    if (!parsed.ok()) return parsed.status();
    // Replaces the entry of the same (device, step): the step is the
    // candidate's name up to its '/'.
    const auto step_of = [](const std::string& candidate) {
      return candidate.substr(0, candidate.find('/'));
    };
    for (TuningEntry& e : *parsed) {
      if (e.device != winner.device || step_of(e.candidate) != step_of(winner.candidate)) {
        entries.push_back(std::move(e));
      }
    }
  }
  entries.push_back(winner);
  std::ofstream out(path);
  out << FormatTuningTable(entries);
  return out ? absl::OkStatus() : absl::InternalError("cannot write " + path);
}

int Run() {
  ladder::Register();
  const std::vector<DeviceInfo> devices = ListCudaDevices();
  if (devices.empty()) {
    std::fprintf(stderr, "attn_tune: no CUDA device with compute capability >= 8.0\n");
    return 1;
  }
  const std::string device = devices[0].name;
  TimingOptions options;
  options.warmup = absl::GetFlag(FLAGS_warmup);
  options.iterations = absl::GetFlag(FLAGS_iters);
  // The candidates of one step: their names share its prefix ("k07/").
  const std::string prefix = absl::StrFormat("k%02d/", absl::GetFlag(FLAGS_step));
  std::vector<KernelInfo> candidates;
  for (KernelInfo& c : ListTuningCandidates()) {
    if (absl::StartsWith(c.name, prefix)) candidates.push_back(std::move(c));
  }
  if (candidates.empty()) {
    std::fprintf(stderr, "attn_tune: no tuning candidates for step %d in this build\n",
                 absl::GetFlag(FLAGS_step));
    return 1;
  }
  std::map<std::string, double> inverse_sum;  // Σ 1/TFLOP/s per candidate
  std::map<std::string, bool> correct;
  int points = 0;

  std::printf("tuning step %d on %s: %zu candidates\n", absl::GetFlag(FLAGS_step),
              device.c_str(), candidates.size());
  for (DType dtype : ParseDTypeList(absl::GetFlag(FLAGS_dtypes))) {
    for (int64_t seq : ParseIntList("seq_lens", absl::GetFlag(FLAGS_seq_lens))) {
      const AttentionProblem shape = AttentionProblem::SelfAttention(
          BatchFor(seq, 0, absl::GetFlag(FLAGS_tokens)), seq, absl::GetFlag(FLAGS_heads), 128);
      absl::StatusOr<DeviceProblem> problem = DeviceProblem::Create(shape, dtype, options, seq);
      if (!problem.ok()) {
        std::fprintf(stderr, "attn_tune: %s\n", problem.status().ToString().c_str());
        return 1;
      }
      ++points;
      for (const KernelInfo& c : candidates) {
        if (!correct.count(c.name)) {
          absl::StatusOr<double> err = problem->RelativeError(c.name);
          correct[c.name] = err.ok() && *err < 1e-2;
        }
        absl::StatusOr<KernelTiming> t = problem->Time(c.name, options);
        if (!t.ok()) {
          std::fprintf(stderr, "attn_tune: %s: %s\n", c.name.c_str(),
                       t.status().ToString().c_str());
          return 1;
        }
        inverse_sum[c.name] += 1.0 / t->tflops;
        std::printf("  %-26s %-5s S=%-6ld %8.1f TFLOP/s\n", c.name.c_str(), DTypeName(dtype),
                    static_cast<long>(seq), t->tflops);
        std::fflush(stdout);
      }
    }
  }

  std::string best;
  double best_hmean = 0;
  std::printf("\n%-26s %14s %8s\n", "candidate", "hmean TFLOP/s", "correct");
  for (const KernelInfo& c : candidates) {
    const double hmean = points / inverse_sum[c.name];
    std::printf("%-26s %14.1f %8s\n", c.name.c_str(), hmean, correct[c.name] ? "yes" : "NO");
    if (correct[c.name] && hmean > best_hmean) {
      best_hmean = hmean;
      best = c.name;
    }
  }
  if (best.empty()) {
    std::fprintf(stderr, "attn_tune: no candidate passed the correctness check\n");
    return 1;
  }
  char date[16];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%d", std::gmtime(&now));
  const TuningEntry winner{device, best,
                           absl::StrFormat("%s attn_tune hmean %.1f TFLOP/s over S=%s, %s",
                                           date, best_hmean, absl::GetFlag(FLAGS_seq_lens),
                                           absl::GetFlag(FLAGS_dtypes))};
  std::printf("\nwinner on %s: %s (%.1f TFLOP/s harmonic mean)\n", device.c_str(), best.c_str(),
              best_hmean);
  if (const std::string path = absl::GetFlag(FLAGS_write); !path.empty()) {
    if (absl::Status st = WriteWinner(path, winner); !st.ok()) {
      std::fprintf(stderr, "attn_tune: %s\n", st.ToString().c_str());
      return 1;
    }
    std::printf("wrote %s\n", path.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace attn::bench

int main(int argc, char** argv) {
  const std::vector<char*> args = attn::ParseCommandLine(
      argc, argv,
      {"attn_tune",
       "Auto-tunes a ladder step (7 by default) for this GPU (see bench/README.md).\n\n"
       "usage: attn_tune [--step=7] [--seq_lens=...] [--dtypes=bf16,fp16] [--write=TABLE]\n\n"
       "example:\n"
       "  attn_tune --write=kernels/tuning/tuned_configs.tsv",
       {"bench/attn_tune.cc"}});
  if (args.size() > 1) {
    std::fprintf(stderr, "attn_tune: unexpected argument '%s' (see --help)\n", args[1]);
    return attn::kExitUsage;
  }
  return attn::bench::Run();
}
