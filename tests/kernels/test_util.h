// Shared helpers for the kernel tests: fresh random inputs, quantised host
// tensors with their float values, and error measures against float64.
#ifndef ATTN_TESTS_KERNELS_TEST_UTIL_H_
#define ATTN_TESTS_KERNELS_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "attn/tensor.h"

namespace attn::testing {

// A seed from std::random_device: every run draws new inputs. Tests print
// it so a failure can be replayed.
uint64_t FreshSeed();

// Q, K, V drawn from N(0, 1), stored as 16-bit `dtype`, plus the exact float
// value of every stored element (what a kernel actually sees).
struct HostInputs {
  Shape shape;
  DType dtype = DType::kBFloat16;
  uint64_t seed = 0;
  std::vector<uint16_t> q, k, v;
  std::vector<float> q_float, k_float, v_float;
};
HostInputs MakeRandomInputs(const Shape& shape, DType dtype, uint64_t seed);

// A 16-bit NaN pattern to poison outputs with before a run.
inline constexpr uint16_t kPoisonBits = 0x7fff;

// ‖out − ref‖₂ / ‖ref‖₂ over all elements (out in 16-bit `dtype`).
double RelativeL2Error(const std::vector<uint16_t>& out, DType dtype,
                       const std::vector<double>& ref);

// Number of elements of `out` that are NaN or infinite (unwritten poison
// shows up here).
int64_t CountNonFinite(const std::vector<uint16_t>& out, DType dtype);

// "dtype=bf16 shape=[...] seed=..." for failure messages.
std::string Describe(const HostInputs& inputs);

}  // namespace attn::testing

#endif  // ATTN_TESTS_KERNELS_TEST_UTIL_H_
