#include "test_util.h"

#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"

namespace attn::testing {

uint64_t FreshSeed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

HostInputs MakeRandomInputs(const Shape& shape, DType dtype, uint64_t seed) {
  HostInputs in;
  in.shape = shape;
  in.dtype = dtype;
  in.seed = seed;
  const size_t n = static_cast<size_t>(shape.NumElements());
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto fill = [&](std::vector<uint16_t>& bits, std::vector<float>& values) {
    bits.resize(n);
    values.resize(n);
    for (size_t i = 0; i < n; ++i) {
      bits[i] = FloatToBits(normal(rng), dtype);
      values[i] = BitsToFloat(bits[i], dtype);
    }
  };
  fill(in.q, in.q_float);
  fill(in.k, in.k_float);
  fill(in.v, in.v_float);
  return in;
}

double RelativeL2Error(const std::vector<uint16_t>& out, DType dtype,
                       const std::vector<double>& ref) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = static_cast<double>(BitsToFloat(out[i], dtype)) - ref[i];
    diff += d * d;
    norm += ref[i] * ref[i];
  }
  return std::sqrt(diff) / std::sqrt(norm);
}

int64_t CountNonFinite(const std::vector<uint16_t>& out, DType dtype) {
  int64_t count = 0;
  for (uint16_t bits : out) count += std::isfinite(BitsToFloat(bits, dtype)) ? 0 : 1;
  return count;
}

std::string Describe(const HostInputs& in) {
  return absl::StrCat("dtype=", DTypeName(in.dtype), " shape=", in.shape.ToString(),
                      " seed=", in.seed);
}

}  // namespace attn::testing
