// attn/cpu_flash.h
//
// The fast CPU kernel ("cpu_flash", the CPU backend's default):
// FlashAttention's forward on host memory — tiles of Q (query rows × the query
// heads of one KV group) against blocks of K/V, the two products per block on
// oneDNN's matmul (bf16 operands where the host has a bf16 matmul, else
// f32; the environment variable ATTN_CPU_FLASH_F32=1 forces f32), online
// softmax in f32 — for every feature of attn/problem.h, as the reference
// kernel (attn/cpu_reference.h) computes it. Tasks run on a CpuThreadPool.
#ifndef ATTN_CPU_FLASH_H_
#define ATTN_CPU_FLASH_H_

#include <atomic>

#include "attn/cpu_thread_pool.h"
#include "attn/problem.h"

namespace attn {

// Assumes ValidateArgs passed for a CPU kernel (host pointers). `cancel`
// (optional) is read between tasks (a task is one Q tile); once true the
// remaining tasks are skipped and the call returns false, leaving the
// output partly written. Returns true when every row was computed. With a
// K/V cache and append, the new rows are written before any task runs.
bool AttentionCpuFlash(const AttentionArgs& args, CpuThreadPool& pool,
                       const std::atomic<bool>* cancel = nullptr);

}  // namespace attn

#endif  // ATTN_CPU_FLASH_H_
