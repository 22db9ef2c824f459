// The hopper family's tile configurations (hopper_fwd_kernel.cuh): plain
// C++, so the host registry includes it too.
#ifndef ATTN_KERNELS_SRC_CUDA_HOPPER_CONFIG_H_
#define ATTN_KERNELS_SRC_CUDA_HOPPER_CONFIG_H_

#include <type_traits>

namespace attn::fa2 {

// Marks a configuration as the hopper kernel's (launch.cuh launches it).
struct HopperTileTag {};

// One producer warpgroup (TMA) and kConsumers consumer warpgroups of 64
// query rows each; K/V in a ring of kStages stages of kBlockN rows.
// kPingPong: the consumers take turns issuing their MMAs
// (FlashAttention-3's warp scheduler barrier), so one's softmax runs while
// the next one's MMAs hold the tensor cores.
template <int HeadDim, int BlockN, int Consumers = 2, int Stages = 2, bool PingPong = true>
struct HopperFwdTile : HopperTileTag {
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kBlockM = 64 * Consumers;
  static constexpr int kBlockN = BlockN;
  static constexpr int kConsumers = Consumers;
  static constexpr int kStages = Stages;
  static constexpr bool kPingPong = PingPong;
  static constexpr int kNumWarps = 4 * (Consumers + 1);
  // setmaxnreg budgets (65536 registers per SM, one CTA): the producer
  // keeps 24, the consumers share the rest in multiples of 8.
  static constexpr int kProducerRegisters = 24;
  static constexpr int kConsumerRegisters = (65536 / 128 - kProducerRegisters) / Consumers / 8 * 8 >
                                                    240
                                                ? 240
                                                : (65536 / 128 - kProducerRegisters) / Consumers /
                                                      8 * 8;
};

template <class Cfg>
inline constexpr bool kIsHopperTile = std::is_base_of_v<HopperTileTag, Cfg>;

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_HOPPER_CONFIG_H_
