// attn_bench: times registered attention kernels on the GPU.
//
//   attn_bench --list                      kernel names, one per line
//   attn_bench --list --noladder           the production kernels only
//   attn_bench --kernels=all --seq_lens=4096 --dtypes=bf16,fp16
//
// For every (kernel, dtype, seq_len): a correctness check against the float32
// GPU reference, then the median of --iters launches timed with CUDA events
// after --warmup launches, over rotating input sets larger than L2. Prints
// milliseconds and TFLOP/s (4·B·H·S²·D per call).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_split.h"
#include "attn/attention.h"
#include "attn/command_line.h"
#include "attn/device.h"
#include "attn/ladder.h"
#include "bench_flags.h"
#include "kernel_timer.h"

ABSL_FLAG(bool, list, false, "print the registered kernel names, one per line, and exit");
ABSL_FLAG(bool, ladder, true,
          "register the FA2 ladder (attn::ladder: steps and tuning candidates); false: the "
          "production kernels only");
ABSL_FLAG(bool, candidates, false, "include the step-7 tuning candidates (k07/...)");
ABSL_FLAG(std::string, kernels, "all", "comma-separated kernel names, or 'all'");
ABSL_FLAG(std::string, dtypes, "bf16", "comma-separated: bf16, fp16");
ABSL_FLAG(std::string, seq_lens, "4096", "comma-separated sequence lengths");
ABSL_FLAG(int64_t, tokens, 16384, "batch = tokens / seq_len unless --batch is set");
ABSL_FLAG(int64_t, batch, 0, "fixed batch size (0: from --tokens)");
ABSL_FLAG(int64_t, heads, 16, "number of query heads");
ABSL_FLAG(int64_t, kv_heads, 0, "number of key/value heads (0: --heads)");
ABSL_FLAG(int64_t, head_dim, 128, "head dimension");
ABSL_FLAG(bool, causal, false, "causal mask (kernels without it are skipped)");
ABSL_FLAG(int, warmup, 10, "untimed launches before timing");
ABSL_FLAG(int, iters, 50, "timed launches; the median is reported");
ABSL_FLAG(bool, check, true, "check each kernel against the float32 GPU reference first");

namespace attn::bench {
namespace {

std::vector<std::string> SelectedKernels() {
  std::vector<std::string> names;
  const std::string flag = absl::GetFlag(FLAGS_kernels);
  if (flag != "all") return absl::StrSplit(flag, ',', absl::SkipEmpty());
  for (const KernelInfo& k : ListKernels()) {
    if (k.backend == Backend::kCuda) names.push_back(k.name);
  }
  if (absl::GetFlag(FLAGS_candidates)) {
    for (const KernelInfo& k : ListTuningCandidates()) names.push_back(k.name);
  }
  return names;
}

int Run() {
  if (absl::GetFlag(FLAGS_ladder)) ladder::Register();
  if (absl::GetFlag(FLAGS_list)) {
    for (const std::string& name : SelectedKernels()) std::printf("%s\n", name.c_str());
    return 0;
  }
  const std::vector<DeviceInfo> devices = ListCudaDevices();
  if (devices.empty()) {
    std::fprintf(stderr, "attn_bench: no CUDA device with compute capability >= 8.0\n");
    return 1;
  }
  std::printf("device: %s (sm_%d%d, %d SMs)\n", devices[0].name.c_str(), devices[0].compute_major,
              devices[0].compute_minor, devices[0].multiprocessors);
  TimingOptions options;
  options.warmup = absl::GetFlag(FLAGS_warmup);
  options.iterations = absl::GetFlag(FLAGS_iters);
  const std::vector<std::string> kernels = SelectedKernels();
  std::printf("%-28s %-5s %6s %4s %5s %10s %10s %9s\n", "kernel", "dtype", "seq", "B", "H",
              "median_ms", "TFLOP/s", "rel_err");
  int failures = 0;
  for (DType dtype : ParseDTypeList(absl::GetFlag(FLAGS_dtypes))) {
    for (int64_t seq : ParseIntList("seq_lens", absl::GetFlag(FLAGS_seq_lens))) {
      AttentionProblem shape = AttentionProblem::SelfAttention(
          BatchFor(seq, absl::GetFlag(FLAGS_batch), absl::GetFlag(FLAGS_tokens)), seq,
          absl::GetFlag(FLAGS_heads), absl::GetFlag(FLAGS_head_dim));
      if (absl::GetFlag(FLAGS_kv_heads) > 0) shape.heads_kv = absl::GetFlag(FLAGS_kv_heads);
      shape.causal = absl::GetFlag(FLAGS_causal);
      absl::StatusOr<DeviceProblem> problem = DeviceProblem::Create(shape, dtype, options, seq);
      if (!problem.ok()) {
        std::fprintf(stderr, "attn_bench: %s\n", problem.status().ToString().c_str());
        return 1;
      }
      for (const std::string& kernel : kernels) {
        double err = -1;
        if (absl::GetFlag(FLAGS_check)) {
          absl::StatusOr<double> e = problem->RelativeError(kernel);
          if (!e.ok()) {
            std::printf("%-28s %-5s %6ld  skipped: %s\n", kernel.c_str(), DTypeName(dtype),
                        static_cast<long>(seq), e.status().ToString().c_str());
            continue;
          }
          err = *e;
          if (!(err < 1e-2)) ++failures;
        }
        absl::StatusOr<KernelTiming> t = problem->Time(kernel, options);
        if (!t.ok()) {
          std::fprintf(stderr, "attn_bench: %s: %s\n", kernel.c_str(), t.status().ToString().c_str());
          return 1;
        }
        std::printf("%-28s %-5s %6ld %4ld %5ld %10.4f %10.1f %9.2e\n", kernel.c_str(),
                    DTypeName(dtype), static_cast<long>(seq), static_cast<long>(shape.batch),
                    static_cast<long>(shape.heads_q), t->median_ms, t->tflops, err);
        std::fflush(stdout);
      }
    }
  }
  if (failures > 0) std::printf("attn_bench: %d kernel runs exceeded relative error 1e-2\n", failures);
  return failures > 0 ? 1 : 0;
}

}  // namespace
}  // namespace attn::bench

int main(int argc, char** argv) {
  const std::vector<char*> args = attn::ParseCommandLine(
      argc, argv,
      {"attn_bench",
       "Times attention kernels on the GPU (see bench/README.md).\n\n"
       "usage: attn_bench [--list] [--kernels=all|NAME,...] [--dtypes=bf16,fp16] "
       "[--seq_lens=4096,...]\n\n"
       "examples:\n"
       "  attn_bench --list\n"
       "  attn_bench --kernels=all --seq_lens=4096 --dtypes=bf16,fp16",
       {"bench/attn_bench.cc"}});
  if (args.size() > 1) {
    std::fprintf(stderr, "attn_bench: unexpected argument '%s' (see --help)\n", args[1]);
    return attn::kExitUsage;
  }
  return attn::bench::Run();
}
