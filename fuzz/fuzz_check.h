// fuzz/fuzz_check.h
//
// FUZZ_CHECK(condition, format, ...): the fuzz targets' assertion. Unlike
// assert() it holds in every build type; on failure it prints the condition
// and the printf-style details, then aborts, which libFuzzer reports as a
// crash and saves the input that caused it. CheckDocumentedRefusal: the
// check every refusal the targets provoke must pass.
#ifndef ATTN_FUZZ_FUZZ_CHECK_H_
#define ATTN_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"

#define FUZZ_CHECK(condition, ...)                                  \
  do {                                                              \
    if (!(condition)) {                                             \
      std::fprintf(stderr, "FUZZ_CHECK(%s) failed: ", #condition);  \
      std::fprintf(stderr, __VA_ARGS__);                            \
      std::fprintf(stderr, "\n");                                   \
      std::abort();                                                 \
    }                                                               \
  } while (0)

namespace attn::fuzz {

// A refusal with one of the codes the server's calls document for bad
// input (INVALID_ARGUMENT, RESOURCE_EXHAUSTED, NOT_FOUND,
// FAILED_PRECONDITION), and a message.
inline void CheckDocumentedRefusal(const absl::Status& status) {
  const absl::StatusCode code = status.code();
  FUZZ_CHECK(code == absl::StatusCode::kInvalidArgument ||
                 code == absl::StatusCode::kResourceExhausted ||
                 code == absl::StatusCode::kNotFound ||
                 code == absl::StatusCode::kFailedPrecondition,
             "%s", status.ToString().c_str());
  FUZZ_CHECK(!status.message().empty(), "a refusal without a message");
}

}  // namespace attn::fuzz

#endif  // ATTN_FUZZ_FUZZ_CHECK_H_
