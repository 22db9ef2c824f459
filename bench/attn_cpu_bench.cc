// attn_cpu_bench: the CPU kernels' speed on the rows of the CPU backend's
// table (bench/RESULTS.md), on thread pools of the sizes asked for.
// Per row: the median wall time of --iters calls after --warmup (steady
// clock around each call; the kernels run synchronously), GFLOP/s of the
// visible work, and the output's relative L2 distance to cpu_reference's on
// the same inputs (itself tested against float64 in the cpu tests).
// bench/cpu_table.py puts the same kernels beside PyTorch's CPU SDPA.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "attn/attention.h"
#include "attn/command_line.h"
#include "attn/cpu_kernels.h"
#include "attn/cpu_thread_pool.h"

ABSL_FLAG(std::string, kernels, "cpu_flash", "comma-separated CPU kernel names");
ABSL_FLAG(std::string, dtypes, "bf16,fp16", "comma-separated: bf16, fp16");
ABSL_FLAG(std::string, rows, "1x1024x8x8x128,1x4096x16x16x128,1x4096x16x16x128c,16x1:8192x32x8x128",
          "comma-separated problems BxS[:Sk]xHqxHkvxD, suffix c = causal (bottom "
          "right)");
ABSL_FLAG(std::string, threads, "0",
          "comma-separated pool sizes; 0 = the cores this process may use");
ABSL_FLAG(int, warmup, 2, "untimed calls per row");
ABSL_FLAG(int, iters, 10, "timed calls per row; the median is reported");
ABSL_FLAG(bool, check, true, "compare each output with cpu_reference's");

namespace attn {
namespace {

bool ParseRow(const std::string& text, AttentionProblem* p) {
  std::string spec = text;
  const bool causal = !spec.empty() && spec.back() == 'c';
  if (causal) spec.pop_back();
  std::vector<std::string> parts = absl::StrSplit(spec, 'x');
  if (parts.size() != 5) return false;
  std::vector<std::string> lengths = absl::StrSplit(parts[1], ':');
  int64_t b, sq, sk, hq, hkv, d;
  if (!absl::SimpleAtoi(parts[0], &b) || !absl::SimpleAtoi(lengths[0], &sq) ||
      !absl::SimpleAtoi(lengths.back(), &sk) || !absl::SimpleAtoi(parts[2], &hq) ||
      !absl::SimpleAtoi(parts[3], &hkv) || !absl::SimpleAtoi(parts[4], &d)) {
    return false;
  }
  *p = AttentionProblem::SelfAttention(b, sq, hq, d);
  p->seqlen_k = sk;
  p->heads_kv = hkv;
  p->causal = causal;
  return true;
}

std::vector<uint16_t> RandomBits(int64_t n, DType dtype, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<uint16_t> bits(n);
  for (uint16_t& b : bits) b = FloatToBits(uniform(rng), dtype);
  return bits;
}

double RelativeL2(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, DType dtype) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = BitsToFloat(a[i], dtype), y = BitsToFloat(b[i], dtype);
    num += (x - y) * (x - y);
    den += y * y;
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

int Main() {
  std::vector<std::string> kernels = absl::StrSplit(absl::GetFlag(FLAGS_kernels), ',');
  std::vector<std::string> dtypes = absl::StrSplit(absl::GetFlag(FLAGS_dtypes), ',');
  std::vector<std::string> rows = absl::StrSplit(absl::GetFlag(FLAGS_rows), ',');
  std::vector<std::string> thread_list = absl::StrSplit(absl::GetFlag(FLAGS_threads), ',');
  std::mt19937_64 rng(std::random_device{}());
  std::printf(
      "| kernel | dtype | problem | threads | median ms | GFLOP/s | "
      "rel. L2 vs cpu_reference |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const std::string& threads_text : thread_list) {
    int threads = 0;
    if (!absl::SimpleAtoi(threads_text, &threads) || threads < 0) {
      std::fprintf(stderr, "attn_cpu_bench: bad --threads entry '%s'\n", threads_text.c_str());
      return kExitUsage;
    }
    CpuThreadPool pool(threads);
    for (const std::string& row : rows) {
      AttentionProblem p;
      if (!ParseRow(row, &p)) {
        std::fprintf(stderr, "attn_cpu_bench: bad --rows entry '%s'\n", row.c_str());
        return kExitUsage;
      }
      for (const std::string& dtype_name : dtypes) {
        const DType dtype = dtype_name == "fp16" ? DType::kFloat16 : DType::kBFloat16;
        const std::vector<uint16_t> q = RandomBits(p.QElements(), dtype, rng);
        const std::vector<uint16_t> k = RandomBits(p.KVElements(), dtype, rng);
        const std::vector<uint16_t> v = RandomBits(p.KVElements(), dtype, rng);
        std::vector<uint16_t> reference;
        for (const std::string& kernel : kernels) {
          std::vector<uint16_t> out(p.QElements(), 0x7fff);
          const AttentionArgs args =
              AttentionArgs::Contiguous(p, dtype, q.data(), k.data(), v.data(), out.data());
          const absl::StatusOr<KernelInfo> info = FindKernel(kernel);
          if (!info.ok() || info->backend != Backend::kCpu) {
            std::fprintf(stderr, "attn_cpu_bench: '%s' is no CPU kernel\n", kernel.c_str());
            return kExitUsage;
          }
          if (absl::Status st = ValidateArgs(args, *info); !st.ok()) {
            std::fprintf(stderr, "attn_cpu_bench: %s\n", st.ToString().c_str());
            return 1;
          }
          std::vector<double> ms;
          for (int i = 0; i < absl::GetFlag(FLAGS_warmup) + absl::GetFlag(FLAGS_iters); ++i) {
            const auto start = std::chrono::steady_clock::now();
            RunCpuKernel(kernel, args, pool);
            const double elapsed =
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                    .count();
            if (i >= absl::GetFlag(FLAGS_warmup)) ms.push_back(elapsed);
          }
          std::sort(ms.begin(), ms.end());
          const double median = ms[ms.size() / 2];
          std::string error = "-";
          if (absl::GetFlag(FLAGS_check)) {
            if (reference.empty()) {
              reference.assign(p.QElements(), 0x7fff);
              AttentionArgs ref_args = args;
              ref_args.out = reference.data();
              RunCpuKernel(kCpuKernelName, ref_args, pool);
            }
            char buffer[32];
            std::snprintf(buffer, sizeof(buffer), "%.2e", RelativeL2(out, reference, dtype));
            error = buffer;
          }
          std::printf("| %s | %s | %s | %d | %.3f | %.1f | %s |\n", kernel.c_str(),
                      dtype_name.c_str(), p.ToString().c_str(), pool.size(), median,
                      p.Flops() / (median * 1e6), error.c_str());
          std::fflush(stdout);
        }
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace attn

int main(int argc, char** argv) {
  attn::ParseCommandLine(argc, argv,
                         {"attn_cpu_bench",
                          "attn_cpu_bench: the CPU kernels' speed (median of --iters calls per "
                          "row).\n"
                          "  attn_cpu_bench --threads=1,16 --dtypes=bf16 --rows=1x4096x16x16x128c",
                          {"bench/attn_cpu_bench.cc"}});
  return attn::Main();
}
