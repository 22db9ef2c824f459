// Hopper's asynchronous copies and their barriers (PTX ISA 9.7.9.25,
// cp.async.bulk.tensor; 9.7.13.15, mbarrier): the wrappers the hopper
// family's kernels call, never inline asm.
//
// A tensor map (CUtensorMap, made on the host: hopper_launch.cuh) describes
// a global tensor and the box one copy moves; TmaLoad4d copies the box at
// the given element coordinates into shared memory (out-of-range elements
// read as zeros) and counts its bytes on an mbarrier. An mbarrier completes
// a phase when its expected arrivals have arrived and the bytes announced
// with ArriveExpectBytes have landed; Wait(parity) returns once the phase
// of that parity has completed (a fresh barrier is in phase 0, so waiting
// for parity 1 returns at once: the producer's first pass over empty
// stages).
#ifndef ATTN_KERNELS_SRC_CUDA_DEVICE_TMA_CUH_
#define ATTN_KERNELS_SRC_CUDA_DEVICE_TMA_CUH_

#include <cstdint>

namespace attn::fa2 {

struct Mbarrier {
  // Once, by one thread, before any use; then FenceInit() and a CTA barrier.
  __device__ __forceinline__ static void Init(uint32_t bar, uint32_t arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals));
  }
  // Makes the initialisations visible to the asynchronous (TMA) proxy.
  __device__ __forceinline__ static void FenceInit() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  // One arrival that also announces `bytes` more to land in this phase.
  __device__ __forceinline__ static void ArriveExpectBytes(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
                 : "memory");
  }
  __device__ __forceinline__ static void Arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
  }
  __device__ __forceinline__ static void Wait(uint32_t bar, uint32_t parity) {
    uint32_t done = 0;
    do {
      asm volatile(
          "{\n.reg .pred p;\n"
          "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
          "selp.u32 %0, 1, 0, p;\n}\n"
          : "=r"(done)
          : "r"(bar), "r"(parity)
          : "memory");
    } while (done == 0);
  }
};

// The box of `tensor_map` (a __grid_constant__ kernel parameter) at
// coordinates (c0 innermost .. c3) into shared memory at `dst` (1024-byte
// aligned for the 128-byte swizzle), completing on mbarrier `bar`.
__device__ __forceinline__ void TmaLoad4d(uint32_t dst, const void* tensor_map, uint32_t bar,
                                          int c0, int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(tensor_map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}

// Fetches a tensor map's descriptor ahead of its first use.
__device__ __forceinline__ void TmaPrefetchDescriptor(const void* tensor_map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(tensor_map))
               : "memory");
}

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_DEVICE_TMA_CUH_
