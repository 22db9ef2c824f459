// attn/c_boundary.h
//
// The C++ side of attnserve's C ABIs (attn/c_api.h, attn/client/c_api.h):
// both report errors the same way and take the same dtype numbers, so the
// two conversions live here once.
//
// Errors cross the boundary as an int, the absl/gRPC status code (0 OK,
// 3 INVALID_ARGUMENT, ...: the two enums agree), plus the message copied
// into a caller-owned buffer.
#ifndef ATTN_C_BOUNDARY_H_
#define ATTN_C_BOUNDARY_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "attn/dtype.h"

namespace attn {

// Returns status.code() as an int and, when `error` is not null and
// error_size > 0, writes status.message() there, truncated to
// error_size - 1 bytes and NUL-terminated.
int ReportToC(const absl::Status& status, char* error, size_t error_size);

// ATTN_DTYPE_FLOAT16 / ATTN_DTYPE_BFLOAT16 (attn/c_dtype.h) as a DType;
// INVALID_ARGUMENT naming the accepted values otherwise.
absl::StatusOr<DType> DTypeFromC(int dtype);

}  // namespace attn

#endif  // ATTN_C_BOUNDARY_H_
