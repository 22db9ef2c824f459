// server/backends/first_fit_ranges.h
//
// FirstFitRanges: hands out aligned byte ranges of one fixed arena, first
// fit, and merges returned ranges with their free neighbours. The pinned
// output pool (pinned_output_pool.h) lends each response a range sized to
// its output from one pinned block, so a stream of 16 MiB outputs keeps
// four responses in flight per largest-size buffer where whole buffers kept
// one. Not thread-safe: the pool locks around it.
#ifndef ATTN_SERVER_FIRST_FIT_RANGES_H_
#define ATTN_SERVER_FIRST_FIT_RANGES_H_

#include <cstddef>
#include <map>
#include <optional>

namespace attn::server {

// `bytes` rounded up to a multiple of `alignment` (a power of two); 0 stays 0.
inline size_t AlignUp(size_t bytes, size_t alignment) {
  return (bytes + alignment - 1) & ~(alignment - 1);
}

class FirstFitRanges {
 public:
  // An arena of `bytes`, ranges starting at multiples of `alignment` (a
  // power of two) and rounded up to it.
  FirstFitRanges(size_t bytes, size_t alignment);

  // The offset of a free range of at least `bytes` (0 counts as 1), the
  // lowest that fits; nullopt when none does.
  std::optional<size_t> Take(size_t bytes);
  // Gives back the range Take returned at `offset` for `bytes`.
  void Return(size_t offset, size_t bytes);

  size_t free_bytes() const { return free_bytes_; }
  size_t arena_bytes() const { return arena_bytes_; }
  // The range Take(bytes) reserves.
  size_t Rounded(size_t bytes) const;

 private:
  const size_t arena_bytes_;
  const size_t alignment_;
  std::map<size_t, size_t> free_;  // offset -> length, disjoint, never adjacent
  size_t free_bytes_;
};

}  // namespace attn::server

#endif  // ATTN_SERVER_FIRST_FIT_RANGES_H_
