#include "bench_flags.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace attn::bench {

std::vector<int64_t> ParseIntList(const std::string& flag, const std::string& text) {
  std::vector<int64_t> values;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int64_t value = 0;
    if (!absl::SimpleAtoi(item, &value) || value <= 0) {
      std::fprintf(stderr, "--%s: '%s' is not a positive integer\n", flag.c_str(),
                   std::string(item).c_str());
      std::exit(2);
    }
    values.push_back(value);
  }
  return values;
}

std::vector<DType> ParseDTypeList(const std::string& text) {
  std::vector<DType> dtypes;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    DType dtype;
    if (!ParseDType(std::string_view(item.data(), item.size()), &dtype)) {
      std::fprintf(stderr, "--dtypes: '%s' is not fp16 or bf16\n", std::string(item).c_str());
      std::exit(2);
    }
    dtypes.push_back(dtype);
  }
  return dtypes;
}

int64_t BatchFor(int64_t seq_len, int64_t batch, int64_t tokens) {
  return batch > 0 ? batch : std::max<int64_t>(1, tokens / seq_len);
}

}  // namespace attn::bench
