#include "backends/streaming_copy.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>  // SSE2: part of every x86-64 CPU, so no dispatch is needed
#endif

namespace attn::server {

void CopyWithStreamingStores(char* to, const char* from, size_t bytes) {
#if defined(__x86_64__)
  // Streaming stores need 16-byte aligned destinations; small copies are
  // not worth the fence.
  constexpr size_t kLine = 64;
  if (bytes < 4 * kLine) {
    std::memcpy(to, from, bytes);
    return;
  }
  const size_t head = (16 - (reinterpret_cast<uintptr_t>(to) & 15)) & 15;
  std::memcpy(to, from, head);
  to += head;
  from += head;
  bytes -= head;
  // 64 bytes an iteration; consecutive stores fill whole lines of the
  // write-combining buffers, aligned to a line or not.
  const size_t body = bytes & ~(kLine - 1);
  for (size_t i = 0; i < body; i += kLine) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + i + 48), d);
  }
  std::memcpy(to + body, from + body, bytes - body);
  // Streaming stores are weakly ordered: fence them before the caller
  // publishes the copy (to another thread, or to a DMA engine).
  _mm_sfence();
#else
  std::memcpy(to, from, bytes);
#endif
}

}  // namespace attn::server
