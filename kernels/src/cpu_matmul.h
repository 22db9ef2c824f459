// The fast CPU kernel's tile products, C = A · B (+ C), through oneDNN's
// matmul primitive (Debian's libdnnl): it picks the host's best code at run
// time (AVX2, AVX-512, AVX-512 BF16, AMX where present) and blocks small
// products well (measured on a 2-core Zen 4: 128³ f32 185 GFLOP/s per core
// against OpenBLAS 0.3.21's 92; bf16 340). Primitives are made once per
// shape and kept; execution is per calling thread with its own scratchpad.
#ifndef ATTN_KERNELS_SRC_CPU_MATMUL_H_
#define ATTN_KERNELS_SRC_CPU_MATMUL_H_

#include <cstdint>
#include <memory>
#include <tuple>

namespace attn::internal {

// The operands' storage: f32, or bf16 (A and B bf16, C f32 accumulated in
// f32 by the primitive).
enum class MatmulType : int { kF32 = 0, kBF16 = 1 };

// A [m, k] row-major with leading dimension lda; B either [k, n] row-major
// (ldb) or, with b_transposed, given as [n, k] row-major (ldb): C [m, n]
// row-major f32 (ldc). With accumulate, C += A · B, else C = A · B.
struct MatmulShape {
  MatmulType type = MatmulType::kF32;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  bool b_transposed = false;
  bool accumulate = false;
  auto Key() const { return std::tie(type, m, n, k, lda, ldb, ldc, b_transposed, accumulate); }
  bool operator==(const MatmulShape& o) const { return Key() == o.Key(); }
};

class TileMatmul {
 public:
  // The primitive for `shape`, made on first use and kept for the process.
  // Null only for bf16 where this host has no fast bf16 product (a CPU
  // without AVX-512: callers use f32, which always has one).
  static const TileMatmul* Get(const MatmulShape& shape);

  // Whether the host has a bf16 matmul (probed once).
  static bool HasBf16();

  // C (+)= A · B on the calling thread (the primitive runs single-threaded
  // there: the caller's thread pool is the parallelism).
  void Run(const void* a, const void* b, float* c) const;

  struct Impl;
  explicit TileMatmul(std::unique_ptr<Impl> impl);
  ~TileMatmul();

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace attn::internal

#endif  // ATTN_KERNELS_SRC_CPU_MATMUL_H_
