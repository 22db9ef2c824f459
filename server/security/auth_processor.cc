#include "security/auth_processor.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/log.h"
#include "core/status_util.h"

namespace attn::server {
namespace {

// Method paths that need no token (":path" is "/<service>/<method>").
constexpr absl::string_view kHealthPathPrefix = "/grpc.health.v1.Health/";

absl::string_view View(const grpc::string_ref& s) { return {s.data(), s.size()}; }

}  // namespace

grpc::Status TokenAuthProcessor::Process(const InputMetadata& auth_metadata,
                                         grpc::AuthContext* context,
                                         OutputMetadata* consumed_auth_metadata,
                                         OutputMetadata* /*response_metadata*/) {
  absl::string_view path;
  if (auto it = auth_metadata.find(":path"); it != auth_metadata.end()) path = View(it->second);
  if (absl::StartsWith(path, kHealthPathPrefix)) return grpc::Status::OK;

  absl::Status verdict = BearerTokens::Missing();
  if (auto it = auth_metadata.find("authorization"); it != auth_metadata.end()) {
    const absl::StatusOr<size_t> token = tokens_.Identify(View(it->second));
    verdict = token.status();
    consumed_auth_metadata->emplace(std::string(View(it->first)), std::string(View(it->second)));
    if (token.ok()) {
      context->AddProperty(std::string(kCallerProperty), absl::StrCat("token ", *token));
    }
  }
  if (!verdict.ok()) {
    LOGF(kInfo, "refused %s: %s", path, verdict.message());
  }
  return ToGrpcStatus(verdict);
}

}  // namespace attn::server
