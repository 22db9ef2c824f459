#include "status_util.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace attn::internal {

absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view rpc,
                            absl::string_view address) {
  if (status.ok()) return absl::OkStatus();
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  std::string message = absl::StrCat(rpc, " to ", address, ": ", status.error_message());
  if (code == absl::StatusCode::kResourceExhausted &&
      absl::StrContains(status.error_message(), "larger than max")) {
    absl::StrAppend(&message,
                    " (a gRPC message size limit: raise the client's max message sizes, "
                    "or stream the call, which splits tensors into chunks)");
  } else if (code == absl::StatusCode::kUnavailable &&
             (absl::StrContains(status.error_message(), "failed to connect") ||
              absl::StrContains(status.error_message(), "Connection refused"))) {
    absl::StrAppend(&message, " (is attn_server running and listening there?)");
  }
  return absl::Status(code, message);
}

}  // namespace attn::internal
