#include "breadth_cases.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "attn/cpu_reference.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace attn::testing {

absl::StatusOr<std::unique_ptr<ServerProcess>> StartBreadthServer() {
  return ServerProcess::Start({"--backend=cpu", "--cpu_threads=1",
                               absl::StrCat("--max_message_bytes=", kBreadthMaxMessageBytes)});
}

std::vector<BreadthCase> BreadthCases() {
  std::vector<BreadthCase> cases(3);
  cases[0].name = "gqa, kv_seq_len 50 > 31, causal, lse";
  cases[0].geometry.shape = Shape{2, 31, 4, 32};
  cases[0].geometry.kv_seq_len = 50;
  cases[0].geometry.kv_num_heads = 2;
  cases[0].options.causal = true;
  cases[0].options.return_lse = true;
  cases[1].name = "mqa, window (6, 0), lse, large enough to stream";
  cases[1].geometry.shape = Shape{1, 160, 4, 64};  // 80 KiB of q: above the limit
  cases[1].geometry.kv_num_heads = 1;
  cases[1].options.window_left = 6;
  cases[1].options.window_right = 0;
  cases[1].options.return_lse = true;
  cases[2].name = "varlen, causal, lse";
  cases[2].geometry.shape = Shape{3, 0, 2, 16};
  cases[2].geometry.cu_seqlens_q = CumulativeSeqlens({5, 0, 21});
  cases[2].geometry.cu_seqlens_k = CumulativeSeqlens({9, 3, 17});
  cases[2].options.causal = true;
  cases[2].options.return_lse = true;
  for (BreadthCase& c : cases) c.geometry.dtype = DType::kBFloat16;
  return cases;
}

void ExpectMatchesReference(const AttentionInputs& in, const AttendOptions& options,
                            const std::string& out, const std::vector<float>& lse) {
  std::vector<float> q(in.q.size() / 2), k(in.k.size() / 2), v(in.v.size() / 2);
  ToFloat(in.q.data(), in.dtype, q.size(), q.data());
  ToFloat(in.k.data(), in.dtype, k.size(), k.data());
  ToFloat(in.v.data(), in.dtype, v.size(), v.data());
  std::vector<double> ref_lse;
  const std::vector<double> ref =
      AttentionNaiveF64(in.Problem(options), q.data(), k.data(), v.data(),
                        in.varlen() ? in.cu_seqlens_q.data() : nullptr,
                        in.varlen() ? in.cu_seqlens_k.data() : nullptr, &ref_lse);
  std::vector<uint16_t> bits(out.size() / 2);
  std::memcpy(bits.data(), out.data(), out.size());
  EXPECT_LT(RelativeL2Error(bits, in.dtype, ref), 1e-2);
  ASSERT_EQ(lse.size(), options.return_lse ? ref_lse.size() : 0u);
  for (size_t i = 0; i < lse.size(); ++i) {
    if (std::isinf(ref_lse[i])) {
      EXPECT_EQ(lse[i], -std::numeric_limits<float>::infinity()) << i;
    } else {
      EXPECT_NEAR(lse[i], ref_lse[i], 1e-3) << i;
    }
  }
}

}  // namespace attn::testing
