#include "attn/c_boundary.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "attn/c_dtype.h"

namespace attn {

int ReportToC(const absl::Status& status, char* error, size_t error_size) {
  if (error != nullptr && error_size > 0) {
    const absl::string_view message = status.message();
    const size_t n = std::min(message.size(), error_size - 1);
    std::memcpy(error, message.data(), n);
    error[n] = '\0';
  }
  return static_cast<int>(status.code());
}

absl::StatusOr<DType> DTypeFromC(int dtype) {
  switch (dtype) {
    case ATTN_DTYPE_FLOAT16:
      return DType::kFloat16;
    case ATTN_DTYPE_BFLOAT16:
      return DType::kBFloat16;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "dtype is ", dtype, "; it must be ATTN_DTYPE_FLOAT16 (0) or ATTN_DTYPE_BFLOAT16 (1)"));
  }
}

}  // namespace attn
