// tests/support/http_get.h
//
// HttpGet: one plain-HTTP GET on loopback for tests (the server's /metrics,
// Prometheus's query API), with no client library. It sends HTTP/1.0, so
// the answer is never chunked and ends when the server closes the
// connection; the whole exchange is bounded by `timeout`.
#ifndef ATTN_TESTS_SUPPORT_HTTP_GET_H_
#define ATTN_TESTS_SUPPORT_HTTP_GET_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace attn::testing {

struct HttpResponse {
  int status = 0;    // e.g. 200
  std::string body;  // after the headers
};

// GET http://127.0.0.1:<port><target> (target: path and query, already
// percent-encoded). UNAVAILABLE when nothing accepts the connection,
// DEADLINE_EXCEEDED past `timeout`, INTERNAL for a malformed answer.
absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& target,
                                     absl::Duration timeout = absl::Seconds(10));

// Percent-encodes a query parameter's value (RFC 3986 unreserved kept).
std::string UrlEncode(const std::string& value);

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0 and
// closed). Another process may take it before the caller binds it: callers
// that start a server on it retry with a new port when the start fails.
absl::StatusOr<int> FreeLoopbackPort();

}  // namespace attn::testing

#endif  // ATTN_TESTS_SUPPORT_HTTP_GET_H_
