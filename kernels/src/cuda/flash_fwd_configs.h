// The production kernel's ("flash_fwd") configurations, one tile per
// head_dim, built from the shared blocks of kernel_config.h: operands
// sliced, shared memory swizzled with precomputed addresses, the pipelined
// main loop and streaming O stores — the ladder's steps that pay on the H200
// (8–14; 64-column pages and static strides measured slower, bench/RESULTS.md),
// with every breadth feature chosen at launch by the kernel's kEven/kMasked
// switches. Plain C++: the host registry includes this header too.
#ifndef ATTN_KERNELS_SRC_CUDA_FLASH_FWD_CONFIGS_H_
#define ATTN_KERNELS_SRC_CUDA_FLASH_FWD_CONFIGS_H_

#include "hopper_config.h"
#include "kernel_config.h"

namespace attn::fa2 {

template <int HeadDim, int BlockM, int BlockN, int NumWarps>
using FlashFwdTile = KernelConfig<TileShape<HeadDim, BlockM, BlockN, NumWarps>, SlicedOperands,
                                  SwizzledSmem, PipelinedMainLoop, StreamingGlobal>;

// head_dim 128 takes step 7's winner on the H200 and FA2's own choice
// (128x64, 4 warps); the others follow FA2's run_mha_fwd_hdim* for
// sm80/sm90, with 128x64 where FA2 uses 128x128 for head_dim 64 (our P stays
// in separate registers, and 128x128 would spill). head_dim 96 takes FA2's
// 128x64 with 4 warps too, its copies walking padded rows
// (device/gmem_copy.cuh: 1.01x FA2 on an H100, where 8 warps ran 0.75x).
using FlashFwdHdim64 = FlashFwdTile<64, 128, 64, 4>;
using FlashFwdHdim96 = FlashFwdTile<96, 128, 64, 4>;
using FlashFwdHdim128 = FlashFwdTile<128, 128, 64, 4>;
using FlashFwdHdim192 = FlashFwdTile<192, 128, 64, 8>;
using FlashFwdHdim256 = FlashFwdTile<256, 128, 64, 8>;

// Decode tiles: one warp, 16 packed rows (a KV group's query heads × the
// few query rows), 32 keys per block; many small CTAs per SM keep enough
// K/V loads in flight to run at the memory's bandwidth.
template <int HeadDim>
using FlashDecodeTile = KernelConfig<TileShape<HeadDim, 16, 32, 1>, SlicedOperands, SwizzledSmem,
                                     PipelinedMainLoop, StreamingGlobal, GqaPackedRows>;
using FlashDecodeHdim64 = FlashDecodeTile<64>;
using FlashDecodeHdim96 = FlashDecodeTile<96>;
using FlashDecodeHdim128 = FlashDecodeTile<128>;
using FlashDecodeHdim192 = FlashDecodeTile<192>;
using FlashDecodeHdim256 = FlashDecodeTile<256>;

// The hopper family's tiles (sm_90a): FlashAttention-3's non-causal ones,
// two stages. head_dim 64 takes 192 query rows in three consumers x 128
// keys, 128 takes 128 rows in two x 176 keys, both with the consumers in
// ping-pong; 256 takes 128 x 80 without it (each choice the faster one
// measured: bench/RESULTS.md). Other head_dims, and the decode problems,
// run the Ampere family's tiles on sm_90 too.
using HopperFwdHdim64 = HopperFwdTile<64, 128, 3>;
using HopperFwdHdim128 = HopperFwdTile<128, 176>;
using HopperFwdHdim256 = HopperFwdTile<256, 80, 2, 2, false>;

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_FLASH_FWD_CONFIGS_H_
