// The CUDA executor with the pinned heap (server/pinned_heap/pinned_heap.h,
// linked into this test as into attn_server): the arena is page-locked at
// start-up, and a request whose tensors lie in it wholly, mostly (a few
// small pieces outside, staged alone at their offsets) or not at all
// (staged whole) gets exactly the output of the same request staged from
// one contiguous buffer. Skips without a GPU.
#include <cuda_runtime.h>
#include <stdlib.h>

#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "attn/dtype.h"
#include "backends/backend.h"
#include "backends/heap_arena.h"
#include "gtest/gtest.h"
#include "pinned_heap/pinned_heap.h"
#include "core/job.h"
#include "core/tensor_place.h"

namespace attn::server {
namespace {

constexpr size_t kArenaBytes = size_t{256} << 20;
constexpr size_t kArenaPiece = size_t{96} << 10;  // above the heap's 64 KiB threshold

// Memory glibc hands out (posix_memalign is not interposed by the heap),
// freed by the heap's free, which tells the two kinds apart.
struct GlibcBlock {
  explicit GlibcBlock(size_t bytes) {
    if (posix_memalign(&data, 64, bytes) != 0) data = nullptr;
  }
  ~GlibcBlock() { free(data); }
  void* data = nullptr;
};

// Random bf16 values in [-1, 1].
std::string RandomTensor(size_t elements, std::mt19937& rng) {
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::string bytes(elements * 2, '\0');
  for (size_t i = 0; i < elements; ++i) {
    const uint16_t bits = FloatToBf16Bits(value(rng));
    std::memcpy(&bytes[2 * i], &bits, 2);
  }
  return bytes;
}

// How a tensor's bytes are laid out in host memory before the executor
// sees them.
enum class Layout {
  kContiguousGlibc,  // one piece outside the arena: staged whole
  kAllInArena,       // pieces of 96 KiB, each its own arena block
  kMostlyInArena,    // arena pieces with small glibc pieces between them
  kMostlyOutside,    // small pieces outside, one arena piece: staged whole
};

// Holds the memory of pieces of `bytes` laid out as `layout`.
class Pieces {
 public:
  Pieces(const std::string& bytes, Layout layout, const HeapArena& arena) {
    size_t at = 0;
    bool small_next = false;
    while (at < bytes.size()) {
      size_t n = 0;
      bool in_arena = false;
      switch (layout) {
        case Layout::kContiguousGlibc:
          n = bytes.size();
          break;
        case Layout::kAllInArena:
          n = kArenaPiece;
          in_arena = true;
          break;
        case Layout::kMostlyInArena:
          n = small_next ? 22 : kArenaPiece;  // a short read's 22-byte slice, as in call N
          in_arena = !small_next;
          small_next = !small_next;
          break;
        case Layout::kMostlyOutside:
          n = at == 0 ? kArenaPiece : 1000;
          in_arena = at == 0;
          break;
      }
      n = std::min(n, bytes.size() - at);
      // malloc of at least 64 KiB comes from the armed arena.
      char* piece = nullptr;
      if (in_arena) {
        piece = static_cast<char*>(malloc(std::max(n, kArenaPiece)));
        arena_blocks_.push_back(piece);
        EXPECT_TRUE(arena.Contains(absl::string_view(piece, n)));
      } else {
        glibc_blocks_.emplace_back(n);
        piece = static_cast<char*>(glibc_blocks_.back().data);
        EXPECT_FALSE(arena.Contains(absl::string_view(piece, n)));
      }
      std::memcpy(piece, bytes.data() + at, n);
      tensor_.Append(absl::string_view(piece, n));
      at += n;
    }
  }
  ~Pieces() {
    for (char* p : arena_blocks_) free(p);
  }
  const TensorSource& tensor() const { return tensor_; }

 private:
  TensorSource tensor_;
  std::vector<char*> arena_blocks_;
  std::deque<GlibcBlock> glibc_blocks_;
};

class PinnedHeapGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      GTEST_SKIP() << "no CUDA device";
    }
    ProvidePinnedHeap({attn_pinned_heap_arm, attn_pinned_heap_arena, attn_pinned_heap_used_bytes,
                                   attn_pinned_heap_overflows});
    ServerOptions options;
    options.backend = BackendChoice::kCuda;
    options.streams_per_device = 1;
    options.devices = {0};
    options.limits.max_tokens_per_request = int64_t{1} << 22;
    options.pinned_heap_bytes = static_cast<int64_t>(kArenaBytes);
    absl::StatusOr<BackendSetup> setup = CreateBackend(options);
    ASSERT_TRUE(setup.ok()) << setup.status();
    setup_ = std::make_unique<BackendSetup>(*std::move(setup));
    std::optional<HeapArena> arena = FindHeapArena();
    ASSERT_TRUE(arena.has_value()) << "the heap was not armed";
    arena_ = *arena;
  }

  // O of one request over q, k, v laid out as given.
  std::string Run(const std::string& q, const std::string& k, const std::string& v,
                  Layout layout_q, Layout layout_k, Layout layout_v) {
    Pieces pq(q, layout_q, arena_), pk(k, layout_k, arena_), pv(v, layout_v, arena_);
    Job job;
    job.spec.dtype = DType::kBFloat16;
    job.spec.problem = problem_;
    absl::StatusOr<const KernelHandle*> kernel = setup_->catalog->Resolve("", problem_);
    EXPECT_TRUE(kernel.ok()) << kernel.status();
    if (!kernel.ok()) return "";
    job.spec.kernel = *kernel;
    job.q = pq.tensor();
    job.k = pk.tensor();
    job.v = pv.tensor();
    std::string out;
    job.out = TensorDestination::Host(&out);
    job.arrival = absl::Now();
    const absl::Status status = RunOne(*setup_->executors[0], job);
    EXPECT_TRUE(status.ok()) << status;
    EXPECT_EQ(out.size(), q.size());
    return out;
  }

  std::unique_ptr<BackendSetup> setup_;
  HeapArena arena_;
  AttentionProblem problem_ = AttentionProblem::SelfAttention(1, 1024, 8, 64);
};

TEST_F(PinnedHeapGpuTest, ArenaIsPageLocked) {
  cudaPointerAttributes attributes{};
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, arena_.base), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost) << "the arena was not registered with CUDA";
  EXPECT_GE(arena_.bytes, kArenaBytes);
}

TEST_F(PinnedHeapGpuTest, EveryLayoutGivesTheOutputOfContiguousInputs) {
  std::mt19937 rng(11);
  const size_t elements = static_cast<size_t>(problem_.seqlen_q * problem_.heads_q * problem_.head_dim);
  const std::string q = RandomTensor(elements, rng), k = RandomTensor(elements, rng),
                    v = RandomTensor(elements, rng);
  const std::string other_q = RandomTensor(elements, rng), other_k = RandomTensor(elements, rng),
                    other_v = RandomTensor(elements, rng);
  const Layout g = Layout::kContiguousGlibc;
  const std::string expected = Run(q, k, v, g, g, g);
  ASSERT_FALSE(expected.empty());
  const std::string other = Run(other_q, other_k, other_v, g, g, g);
  ASSERT_NE(other, expected) << "different inputs, same output: the check below proves nothing";

  const struct {
    const char* name;
    Layout q, k, v;
  } cases[] = {
      {"all in the arena", Layout::kAllInArena, Layout::kAllInArena, Layout::kAllInArena},
      {"mostly in the arena", Layout::kMostlyInArena, Layout::kMostlyInArena,
       Layout::kMostlyInArena},
      {"mixed routes", Layout::kMostlyInArena, Layout::kMostlyOutside, Layout::kAllInArena},
      {"mostly outside", Layout::kMostlyOutside, Layout::kMostlyOutside, Layout::kMostlyOutside},
  };
  for (const auto& c : cases) {
    // The other inputs first, so device buffers a route failed to fill
    // would still hold them.
    ASSERT_EQ(Run(other_q, other_k, other_v, g, g, g), other) << c.name;
    const std::string got = Run(q, k, v, c.q, c.k, c.v);
    EXPECT_TRUE(got == expected) << c.name << ": output differs from the contiguous inputs'";
  }
}

}  // namespace
}  // namespace attn::server
