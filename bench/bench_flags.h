// Parsing helpers for the benchmark tools' comma-separated flag values.
#ifndef ATTN_BENCH_BENCH_FLAGS_H_
#define ATTN_BENCH_BENCH_FLAGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "attn/dtype.h"

namespace attn::bench {

// "512,1024" -> {512, 1024}; exits with a message on a malformed list.
std::vector<int64_t> ParseIntList(const std::string& flag, const std::string& text);

// "bf16,fp16" -> {kBFloat16, kFloat16}; exits with a message on an unknown name.
std::vector<DType> ParseDTypeList(const std::string& text);

// Batch for a sequence length: `batch` if > 0, else tokens / seq_len (>= 1).
int64_t BatchFor(int64_t seq_len, int64_t batch, int64_t tokens);

}  // namespace attn::bench

#endif  // ATTN_BENCH_BENCH_FLAGS_H_
