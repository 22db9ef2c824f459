// server/status_util.h
//
// absl::Status helpers for the server: the propagation macros that Abseil
// 20220623 lacks, and the one conversion to grpc::Status used at the RPC
// boundary. absl::StatusCode and grpc::StatusCode share the canonical
// google.rpc.Code numbers, so the conversion keeps the code and the message.
//
//   RETURN_IF_ERROR(CheckSomething());
//   ASSIGN_OR_RETURN(Shape shape, DecodeShape(request));
#ifndef ATTN_SERVER_STATUS_UTIL_H_
#define ATTN_SERVER_STATUS_UTIL_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/support/status.h"

namespace attn::server {

// The same code and message as a grpc::Status.
grpc::Status ToGrpcStatus(const absl::Status& status);

// The same code and message as an absl::Status.
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace attn::server

#define ATTN_STATUS_CONCAT_INNER_(a, b) a##b
#define ATTN_STATUS_CONCAT_(a, b) ATTN_STATUS_CONCAT_INNER_(a, b)

// Returns `expr`'s status from the enclosing function when it is not OK.
#define RETURN_IF_ERROR(expr)                                       \
  do {                                                              \
    if (::absl::Status attn_status_ = (expr); !attn_status_.ok()) { \
      return attn_status_;                                          \
    }                                                               \
  } while (false)

// Evaluates `rexpr` (an absl::StatusOr<T>); returns its status when not OK,
// else moves its value into `lhs` (a declaration or an lvalue).
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  ATTN_ASSIGN_OR_RETURN_IMPL_(ATTN_STATUS_CONCAT_(attn_statusor_, __LINE__), lhs, rexpr)
#define ATTN_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr)  \
  auto statusor = (rexpr);                                 \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // ATTN_SERVER_STATUS_UTIL_H_
