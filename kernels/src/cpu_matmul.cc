#include "cpu_matmul.h"

#include <dnnl.hpp>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

// GNU OpenMP's (libgomp, oneDNN's threading runtime in Debian's build):
// declared here rather than through omp.h, so no OpenMP compile flags.
extern "C" void omp_set_num_threads(int threads);

namespace attn::internal {

struct TileMatmul::Impl {
  dnnl::memory::desc a, b, c, scratchpad;
  dnnl::matmul primitive;
  size_t scratchpad_bytes = 0;
};

namespace {

dnnl::engine& Engine() {
  static dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

struct ShapeHash {
  size_t operator()(const MatmulShape& s) const {
    size_t h = static_cast<size_t>(s.type) * 2 + s.b_transposed;
    for (int64_t v : {s.m, s.n, s.k, s.lda, s.ldb, s.ldc, static_cast<int64_t>(s.accumulate)}) {
      h = h * 1000003u ^ static_cast<size_t>(v);
    }
    return h;
  }
};

std::unique_ptr<TileMatmul> Make(const MatmulShape& s) {
  using dt = dnnl::memory::data_type;
  const dt type = s.type == MatmulType::kBF16 ? dt::bf16 : dt::f32;
  try {
    auto impl = std::make_unique<TileMatmul::Impl>();
    impl->a = dnnl::memory::desc({s.m, s.k}, type, dnnl::memory::dims{s.lda, 1});
    impl->b = s.b_transposed ? dnnl::memory::desc({s.k, s.n}, type, dnnl::memory::dims{1, s.ldb})
                             : dnnl::memory::desc({s.k, s.n}, type, dnnl::memory::dims{s.ldb, 1});
    impl->c = dnnl::memory::desc({s.m, s.n}, dt::f32, dnnl::memory::dims{s.ldc, 1});
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (s.accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
#if DNNL_VERSION_MAJOR >= 3  // Ubuntu 24.04's oneDNN 3; Debian 12 has 2.6
    dnnl::matmul::primitive_desc pd(Engine(), impl->a, impl->b, impl->c, attr);
#else
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(impl->a, impl->b, impl->c), attr, Engine());
#endif
    // A bf16 product on oneDNN's reference code is far slower than the f32
    // path, so callers fall back to f32; f32 always has a primitive.
    if (s.type == MatmulType::kBF16 &&
        std::string(pd.impl_info_str()).find("ref") != std::string::npos) {
      return nullptr;
    }
    impl->scratchpad = pd.scratchpad_desc();
    impl->scratchpad_bytes = impl->scratchpad.get_size();
    impl->primitive = dnnl::matmul(pd);
    return std::make_unique<TileMatmul>(std::move(impl));
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

// Per thread: the stream and scratchpad every primitive runs with, and
// oneDNN's OpenMP held to this one thread.
struct ThreadContext {
  ThreadContext() : stream(Engine()) { omp_set_num_threads(1); }
  dnnl::stream stream;
  std::vector<char> scratchpad;
};

ThreadContext& Context() {
  thread_local ThreadContext context;
  return context;
}

}  // namespace

TileMatmul::TileMatmul(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TileMatmul::~TileMatmul() = default;

const TileMatmul* TileMatmul::Get(const MatmulShape& shape) {
  static std::mutex mutex;
  static auto* cache = new std::unordered_map<MatmulShape, std::unique_ptr<TileMatmul>, ShapeHash>;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache->find(shape);
  if (it == cache->end()) it = cache->emplace(shape, Make(shape)).first;
  return it->second.get();
}

bool TileMatmul::HasBf16() {
  static const bool has = [] {
    MatmulShape probe;
    probe.type = MatmulType::kBF16;
    probe.m = probe.n = probe.k = probe.lda = probe.ldb = probe.ldc = 64;
    return Get(probe) != nullptr;
  }();
  return has;
}

void TileMatmul::Run(const void* a, const void* b, float* c) const {
  ThreadContext& context = Context();
  if (context.scratchpad.size() < impl_->scratchpad_bytes + 64) {
    context.scratchpad.resize(impl_->scratchpad_bytes + 64);
  }
  const dnnl::engine& engine = Engine();
  dnnl::memory a_mem(impl_->a, engine, const_cast<void*>(a));
  dnnl::memory b_mem(impl_->b, engine, const_cast<void*>(b));
  dnnl::memory c_mem(impl_->c, engine, c);
  dnnl::memory scratch(impl_->scratchpad, engine, context.scratchpad.data());
  impl_->primitive.execute(context.stream, {{DNNL_ARG_SRC, a_mem},
                                            {DNNL_ARG_WEIGHTS, b_mem},
                                            {DNNL_ARG_DST, c_mem},
                                            {DNNL_ARG_SCRATCHPAD, scratch}});
}

}  // namespace attn::internal
