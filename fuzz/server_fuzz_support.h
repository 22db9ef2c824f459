// fuzz/server_fuzz_support.h
//
// What the server fuzz targets share: the CPU backend's kernel catalog,
// a TensorSource view flattened into one string, quiet protobuf logs, and
// the check every refusal of the request codec must pass.
#ifndef ATTN_FUZZ_SERVER_FUZZ_SUPPORT_H_
#define ATTN_FUZZ_SERVER_FUZZ_SUPPORT_H_

#include <cstdlib>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/kernel_catalog.h"
#include "fuzz_check.h"
#include "google/protobuf/stubs/logging.h"
#include "core/tensor_place.h"

namespace attn::fuzz {

// The catalog attn_server --backend=cpu resolves requests against.
inline const server::KernelCatalog& CpuCatalog() {
  static const server::KernelCatalog* catalog = [] {
    absl::StatusOr<server::KernelCatalog> c = server::KernelCatalog::ForBackend(Backend::kCpu);
    FUZZ_CHECK(c.ok(), "%s", c.status().ToString().c_str());
    return new server::KernelCatalog(*std::move(c));
  }();
  return *catalog;
}

inline std::string Bytes(const server::TensorSource& t) {
  std::string out(static_cast<size_t>(t.size()), '\0');
  t.CopyTo(out.data());
  return out;
}

// Protobuf logs an error for every string field that is not UTF-8: on
// fuzzed input, thousands of lines that say nothing the verdict does not.
inline void SilenceProtobufLogs() { google::protobuf::SetLogHandler(nullptr); }

// A refusal of DecodeRequestHeader / DecodeAttendRequest: one of the codes
// tensor_codec.h documents, with a message.
inline void CheckDecodeRefusal(const absl::Status& status) { CheckDocumentedRefusal(status); }

}  // namespace attn::fuzz

#endif  // ATTN_FUZZ_SERVER_FUZZ_SUPPORT_H_
