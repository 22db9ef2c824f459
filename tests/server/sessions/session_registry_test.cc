// The session registry and page pool (server/sessions/), checked by running
// their step plans through the CPU kernel on a host pool and comparing each
// step's output with float64 attention over the session's token history:
// prefill and decode, many sessions in one call, forks sharing pages,
// truncation, reservations, pool exhaustion, lease ownership, expiry.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <tuple>
#include <string>
#include <vector>

#include "attn/cpu_reference.h"
#include "attn/dtype.h"
#include "attn/validate.h"
#include "gtest/gtest.h"
#include "sessions/page_pool.h"
#include "sessions/session_memory.h"
#include "sessions/session_registry.h"
#include "sessions/step_args.h"

namespace attn::server {
namespace {

constexpr char kOwner[] = "ipv4:127.0.0.1:1";

// A registry over host pages, with a float64 model of every session.
class Harness {
 public:
  Harness(int64_t pages, int64_t page_bytes, SessionLimits limits = {})
      : memory_(HostSessionMemory(pages, page_bytes)), pool_(memory_->layout()) {
    limits.page_bytes = page_bytes;
    registry_ = std::make_unique<SessionRegistry>(
        limits, std::make_unique<PagePool>(pages),
        [this](int32_t dst, int32_t src, int64_t bytes) {
          return memory_->CopyPage(dst, src, bytes);
        });
    lease_ = registry_->OpenLease(kOwner);
  }

  SessionRegistry& registry() { return *registry_; }
  const std::string& lease() const { return lease_; }

  // Per session and layer: every cached token's k and v rows (bf16 values).
  struct Model {
    SessionGeometry g;
    std::vector<std::vector<float>> k, v;  // per layer, [tokens, heads_kv, d]
  };
  std::map<std::string, Model>& models() { return models_; }

  std::string Open(const SessionGeometry& g) {
    absl::StatusOr<SessionSnapshot> s = registry_->Open(lease_, kOwner, g);
    EXPECT_TRUE(s.ok()) << s.status();
    Model m{g, std::vector<std::vector<float>>(g.num_layers),
            std::vector<std::vector<float>>(g.num_layers)};
    models_[s->session_id] = m;
    return s->session_id;
  }

  // One step call over `steps` at `layer` with fresh random tokens; checks
  // the output against float64 and returns the worst error (or the error
  // the registry or kernel gave).
  absl::StatusOr<double> Step(int64_t layer, const std::vector<StepEntry>& steps) {
    absl::StatusOr<StepPlan> plan = registry_->BeginStep(lease_, kOwner, layer, steps);
    if (!plan.ok()) return plan.status();
    const SessionGeometry& g = plan->geometry;
    const int64_t n = plan->total_tokens;
    std::vector<float> q(n * g.heads_q * g.head_dim), k(n * g.heads_kv * g.head_dim),
        v(k.size());
    for (std::vector<float>* t : {&q, &k, &v}) {
      for (float& x : *t) x = Bf16BitsToFloat(FloatToBf16Bits(dist_(rng_)));
    }
    std::vector<uint16_t> qb(q.size()), kb(k.size()), vb(v.size()), ob(q.size(), 0xFFFF);
    FromFloat(q.data(), q.size(), g.dtype, qb.data());
    FromFloat(k.data(), k.size(), g.dtype, kb.data());
    FromFloat(v.data(), v.size(), g.dtype, vb.data());
    std::vector<float> lse(n * g.heads_q);
    const RequestSpec spec = StepSpec(*plan, pool_, true);
    const AttentionArgs args = spec.Args(qb.data(), kb.data(), vb.data(), ob.data(), lse.data());
    const absl::StatusOr<KernelInfo> cpu = FindKernel(kCpuKernelName);
    absl::Status valid = ValidateArgs(args, *cpu);
    if (!valid.ok()) {
      registry_->EndStep(*plan, false);
      return valid;
    }
    const bool finished = AttentionCpu(args, 2);
    registry_->EndStep(*plan, finished);
    if (!finished) return absl::InternalError("kernel stopped");

    double worst = 0;
    const int64_t rk = g.heads_kv * g.head_dim;
    for (size_t i = 0; i < steps.size(); ++i) {
      Model& m = models_[steps[i].session_id];
      const int64_t begin = plan->cu_seqlens_q[i], count = steps[i].tokens;
      std::vector<float>& mk = m.k[layer];
      std::vector<float>& mv = m.v[layer];
      const int64_t cached = static_cast<int64_t>(mk.size()) / rk;
      mk.insert(mk.end(), k.begin() + begin * rk, k.begin() + (begin + count) * rk);
      mv.insert(mv.end(), v.begin() + begin * rk, v.begin() + (begin + count) * rk);
      const double scale = g.softmax_scale > 0 ? g.softmax_scale : 1.0 / std::sqrt(g.head_dim);
      for (int64_t t = 0; t < count; ++t) {
        const int64_t pos = cached + t;  // sees keys 0..pos (and the window)
        const int64_t first = g.window_left >= 0 ? std::max<int64_t>(0, pos - g.window_left) : 0;
        for (int64_t h = 0; h < g.heads_q; ++h) {
          const int64_t hk = h / (g.heads_q / g.heads_kv);
          const float* qr = &q[((begin + t) * g.heads_q + h) * g.head_dim];
          std::vector<double> s;
          double mx = -1e300;
          for (int64_t j = first; j <= pos; ++j) {
            double dot = 0;
            for (int64_t d = 0; d < g.head_dim; ++d) {
              dot += double(qr[d]) * mk[(j * g.heads_kv + hk) * g.head_dim + d];
            }
            s.push_back(dot * scale);
            mx = std::max(mx, s.back());
          }
          double sum = 0;
          for (double& x : s) sum += (x = std::exp(x - mx));
          for (int64_t d = 0; d < g.head_dim; ++d) {
            double o = 0;
            for (size_t j = 0; j < s.size(); ++j) {
              o += s[j] * mv[((first + int64_t(j)) * g.heads_kv + hk) * g.head_dim + d];
            }
            o /= sum;
            const float got =
                Bf16BitsToFloat(ob[((begin + t) * g.heads_q + h) * g.head_dim + d]);
            worst = std::max(worst, std::abs(double(got) - o));
            if (!std::isfinite(got)) worst = INFINITY;
          }
          const double want_lse = mx + std::log(sum);
          worst = std::max(worst, std::abs(lse[h * n + begin + t] - want_lse) / 8);
        }
      }
    }
    return worst;
  }

  // Mirrors a truncate / fork in the model.
  void Truncated(const std::string& id, int64_t tokens) {
    Model& m = models_[id];
    const size_t rk = static_cast<size_t>(m.g.heads_kv * m.g.head_dim);
    for (int64_t l = 0; l < m.g.num_layers; ++l) {
      m.k[l].resize(m.k[l].size() - tokens * rk);
      m.v[l].resize(m.v[l].size() - tokens * rk);
    }
  }
  void Forked(const std::string& parent, const std::string& child) {
    models_[child] = models_[parent];
  }

 private:
  std::unique_ptr<SessionMemory> memory_;
  PoolLayout pool_;
  std::unique_ptr<SessionRegistry> registry_;
  std::string lease_;
  std::map<std::string, Model> models_;
  std::mt19937 rng_{20261205};
  std::uniform_real_distribution<float> dist_{-1.0f, 1.0f};
};

SessionGeometry Geometry(int64_t layers, int64_t hq, int64_t hkv, int64_t d, int64_t max_tokens) {
  SessionGeometry g;
  g.num_layers = layers;
  g.heads_q = hq;
  g.heads_kv = hkv;
  g.head_dim = d;
  g.max_tokens = max_tokens;
  return g;
}

constexpr double kTolerance = 2e-2;  // bf16 output of O(1) values

TEST(PageTokensTest, LargestPowerOfTwoInHalfAPage) {
  EXPECT_EQ(PageTokens(128 << 10, 8 * 128 * 2), 32);
  EXPECT_EQ(PageTokens(128 << 10, 32 * 128 * 2), 8);
  EXPECT_EQ(PageTokens(1000, 100), 4);  // 500 / 100 = 5 -> 4
  EXPECT_EQ(PageTokens(100, 100), 0);
}

TEST(PagePoolTest, TakeAllOrNoneRefsAndReservations) {
  PagePool pool(10);
  EXPECT_EQ(pool.pages_free(), 10);
  absl::StatusOr<std::vector<int32_t>> a = pool.Take(4, 0, "a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(pool.pages_free(), 6);
  EXPECT_EQ(pool.Take(7, 0, "b").status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(pool.pages_free(), 6);  // nothing taken by the refusal
  ASSERT_TRUE(pool.Reserve(5, "r").ok());
  EXPECT_EQ(pool.pages_free(), 1);
  EXPECT_EQ(pool.Take(2, 0, "c").status().code(), absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(pool.Take(2, 2, "d").ok());  // from the reservation
  EXPECT_EQ(pool.pages_free(), 1);
  pool.Ref((*a)[0]);
  pool.Unref((*a)[0]);
  EXPECT_EQ(pool.refs((*a)[0]), 1);
  for (int32_t p : *a) pool.Unref(p);
  EXPECT_EQ(pool.pages_free(), 5);
  EXPECT_EQ(pool.UnrefAndReserve({}, 3), 0);
}

TEST(SessionRegistryTest, PrefillThenDecodeMatchesFloat64) {
  for (auto [hq, hkv, d] : {std::tuple{4, 4, 64}, std::tuple{8, 2, 128}, std::tuple{6, 1, 96}}) {
    // Small pages, so prefill spans many and decode crosses page ends.
    Harness h(256, 8 * hkv * d * 2 * 2);  // 8 tokens a page
    const std::string s = h.Open(Geometry(2, hq, hkv, d, 200));
    for (int64_t layer = 0; layer < 2; ++layer) {
      absl::StatusOr<double> err = h.Step(layer, {{s, 37}});
      ASSERT_TRUE(err.ok()) << err.status();
      EXPECT_LT(*err, kTolerance) << "prefill hq=" << hq << " hkv=" << hkv << " d=" << d;
    }
    for (int step = 0; step < 12; ++step) {
      for (int64_t layer = 0; layer < 2; ++layer) {
        absl::StatusOr<double> err = h.Step(layer, {{s, 1}});
        ASSERT_TRUE(err.ok()) << err.status();
        EXPECT_LT(*err, kTolerance) << "decode step " << step;
      }
    }
    absl::StatusOr<std::vector<SessionSnapshot>> list = h.registry().List(h.lease(), kOwner);
    ASSERT_TRUE(list.ok());
    ASSERT_EQ(list->size(), 1u);
    EXPECT_EQ(list->front().layer_tokens, (std::vector<int64_t>{49, 49}));
    EXPECT_EQ(list->front().pages, 2 * 7);  // ceil(49 / 8) per layer
  }
}

TEST(SessionRegistryTest, ManySessionsOfDifferentLengthsInOneCall) {
  Harness h(512, 8 * 2 * 64 * 2 * 2);
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(h.Open(Geometry(1, 4, 2, 64, 500)));
  std::vector<StepEntry> prefill;
  for (int i = 0; i < 5; ++i) prefill.push_back({ids[i], 1 + 13 * i});
  absl::StatusOr<double> err = h.Step(0, prefill);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, kTolerance);
  for (int step = 0; step < 5; ++step) {
    std::vector<StepEntry> decode;
    for (int i = 0; i < 5; ++i) decode.push_back({ids[i], 1 + (i + step) % 3});
    err = h.Step(0, decode);
    ASSERT_TRUE(err.ok()) << err.status();
    EXPECT_LT(*err, kTolerance) << "step " << step;
  }
}

TEST(SessionRegistryTest, SlidingWindowOverTheCache) {
  Harness h(256, 8 * 2 * 64 * 2 * 2);
  SessionGeometry g = Geometry(1, 4, 2, 64, 300);
  g.window_left = 10;
  const std::string s = h.Open(g);
  absl::StatusOr<double> err = h.Step(0, {{s, 40}});
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, kTolerance);
  for (int step = 0; step < 4; ++step) {
    err = h.Step(0, {{s, 1}});
    ASSERT_TRUE(err.ok()) << err.status();
    EXPECT_LT(*err, kTolerance);
  }
}

TEST(SessionRegistryTest, ForkSharesFullPagesAndDivergesSafely) {
  const int64_t page_bytes = 8 * 2 * 64 * 2 * 2;  // 8 tokens
  Harness h(256, page_bytes);
  const std::string parent = h.Open(Geometry(2, 4, 2, 64, 300));
  for (int64_t layer = 0; layer < 2; ++layer) ASSERT_TRUE(h.Step(layer, {{parent, 21}}).ok());
  const int64_t used_before = h.registry().pool().pages_used();  // 2 x 3 pages
  absl::StatusOr<SessionSnapshot> child = h.registry().Fork(h.lease(), kOwner, parent);
  ASSERT_TRUE(child.ok()) << child.status();
  h.Forked(parent, child->session_id);
  // Only the partial last page of each layer is copied.
  EXPECT_EQ(h.registry().pool().pages_used(), used_before + 2);
  EXPECT_EQ(child->layer_tokens, (std::vector<int64_t>{21, 21}));
  // Both decode on their own; neither sees the other's new tokens.
  for (int step = 0; step < 6; ++step) {
    for (int64_t layer = 0; layer < 2; ++layer) {
      absl::StatusOr<double> err = h.Step(layer, {{parent, 1}, {child->session_id, 2}});
      ASSERT_TRUE(err.ok()) << err.status();
      EXPECT_LT(*err, kTolerance) << "step " << step;
    }
  }
  // The child's truncate back into the shared pages copies the one it
  // writes next; the parent's tokens stay intact.
  absl::StatusOr<SessionSnapshot> cut =
      h.registry().Truncate(h.lease(), kOwner, child->session_id, 33 - 12);
  ASSERT_TRUE(cut.ok()) << cut.status();
  h.Truncated(child->session_id, 33 - 12);
  EXPECT_EQ(cut->layer_tokens, (std::vector<int64_t>{12, 12}));
  for (int step = 0; step < 3; ++step) {
    for (int64_t layer = 0; layer < 2; ++layer) {
      absl::StatusOr<double> err = h.Step(layer, {{child->session_id, 1}, {parent, 1}});
      ASSERT_TRUE(err.ok()) << err.status();
      EXPECT_LT(*err, kTolerance) << "after truncate, step " << step;
    }
  }
  // Closing both gives every page back.
  ASSERT_TRUE(h.registry().Close(h.lease(), kOwner, parent).ok());
  ASSERT_TRUE(h.registry().Close(h.lease(), kOwner, child->session_id).ok());
  EXPECT_EQ(h.registry().pool().pages_used(), 0);
}

TEST(SessionRegistryTest, TruncateDropsRejectedTokens) {
  Harness h(256, 8 * 2 * 64 * 2 * 2);
  const std::string s = h.Open(Geometry(1, 4, 2, 64, 300));
  ASSERT_TRUE(h.Step(0, {{s, 30}}).ok());
  ASSERT_TRUE(h.Step(0, {{s, 4}}).ok());  // speculative tokens
  ASSERT_TRUE(h.registry().Truncate(h.lease(), kOwner, s, 3).ok());
  h.Truncated(s, 3);
  absl::StatusOr<double> err = h.Step(0, {{s, 1}});
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, kTolerance);
  EXPECT_EQ(h.registry().Truncate(h.lease(), kOwner, s, 33).status().code(),
            absl::StatusCode::kInvalidArgument);  // past the length
}

TEST(SessionRegistryTest, TruncateRefusedWhileLayersDiffer) {
  Harness h(256, 8 * 2 * 64 * 2 * 2);
  const std::string s = h.Open(Geometry(2, 4, 2, 64, 300));
  ASSERT_TRUE(h.Step(0, {{s, 5}}).ok());  // layer 1 not yet
  EXPECT_EQ(h.registry().Truncate(h.lease(), kOwner, s, 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(SessionRegistryTest, PoolFullRefusesAndLosesNothing) {
  Harness h(6, 8 * 2 * 64 * 2 * 2);  // 6 pages of 8 tokens
  const std::string a = h.Open(Geometry(1, 4, 2, 64, 1000));
  const std::string b = h.Open(Geometry(1, 4, 2, 64, 1000));
  ASSERT_TRUE(h.Step(0, {{a, 24}}).ok());  // 3 pages
  absl::StatusOr<double> full = h.Step(0, {{a, 1}, {b, 24}});  // 1 + 3 > 3 free
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.status().message().find("needs 4 new pages, 3 of 6 are free"),
            std::string::npos)
      << full.status();
  EXPECT_EQ(h.registry().counters().rejected_pool_full, 1);
  // Nothing was appended: a still decodes correctly over its 24 tokens.
  absl::StatusOr<double> err = h.Step(0, {{a, 1}});
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, kTolerance);
  absl::StatusOr<std::vector<SessionSnapshot>> list = h.registry().List(h.lease(), kOwner);
  for (const SessionSnapshot& s : *list) {
    EXPECT_EQ(s.layer_tokens[0], s.session_id == a ? 25 : 0);
  }
}

TEST(SessionRegistryTest, BlockTableBeyondTheLimitRefusedAndLosesNothing) {
  SessionLimits limits;
  limits.max_step_block_entries = 5;  // 2 steps x 3 pages do not fit
  Harness h(16, 8 * 2 * 64 * 2 * 2, limits);  // pages of 8 tokens
  const std::string a = h.Open(Geometry(1, 4, 2, 64, 1000));
  const std::string b = h.Open(Geometry(1, 4, 2, 64, 1000));
  ASSERT_TRUE(h.Step(0, {{a, 17}}).ok());  // 3 pages
  absl::StatusOr<double> wide = h.Step(0, {{a, 1}, {b, 1}});
  EXPECT_EQ(wide.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(wide.status().message().find("6 entries (2 steps x 3 pages"), std::string::npos)
      << wide.status();
  EXPECT_EQ(h.registry().pool().pages_used(), 3);
  absl::StatusOr<double> alone = h.Step(0, {{a, 1}});  // 1 x 3 fits
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_LT(*alone, kTolerance);
}

TEST(SessionRegistryTest, ReservedSessionNeverFindsThePoolFull) {
  Harness h(8, 8 * 2 * 64 * 2 * 2);
  SessionGeometry g = Geometry(1, 4, 2, 64, 40);  // 5 pages
  g.reserve = true;
  const std::string r = h.Open(g);
  EXPECT_EQ(h.registry().pool().pages_free(), 3);
  const std::string other = h.Open(Geometry(1, 4, 2, 64, 1000));
  ASSERT_TRUE(h.Step(0, {{other, 24}}).ok());  // takes the 3 free pages
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<double> err = h.Step(0, {{r, 8}});
    ASSERT_TRUE(err.ok()) << "chunk " << i << ": " << err.status();
    EXPECT_LT(*err, kTolerance);
  }
  EXPECT_EQ(h.Step(0, {{r, 1}}).status().code(), absl::StatusCode::kInvalidArgument);  // max_tokens
  // A reservation more than free is refused at open.
  SessionGeometry big = g;
  big.max_tokens = 9;
  EXPECT_EQ(h.registry().Open(h.lease(), kOwner, big).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(SessionRegistryTest, RefusalsNameTheField) {
  Harness h(64, 8 * 2 * 64 * 2 * 2);
  const std::string s = h.Open(Geometry(2, 4, 2, 64, 100));
  const std::string t = h.Open(Geometry(2, 8, 2, 64, 100));
  auto code_and = [&](int64_t layer, std::vector<StepEntry> steps, absl::StatusCode code,
                      const char* field) {
    absl::StatusOr<StepPlan> plan = h.registry().BeginStep(h.lease(), kOwner, layer, steps);
    EXPECT_EQ(plan.status().code(), code) << plan.status();
    EXPECT_NE(plan.status().message().find(field), std::string::npos) << plan.status();
  };
  code_and(2, {{s, 1}}, absl::StatusCode::kInvalidArgument, "layer");
  code_and(0, {{s, 0}}, absl::StatusCode::kInvalidArgument, "steps[0].tokens");
  code_and(0, {{s, 101}}, absl::StatusCode::kInvalidArgument, "steps[0].tokens");
  code_and(0, {{s, 1}, {s, 1}}, absl::StatusCode::kInvalidArgument, "steps[1].session_id");
  code_and(0, {{s, 1}, {t, 1}}, absl::StatusCode::kInvalidArgument, "steps[1].session_id");
  code_and(0, {{"nope", 1}}, absl::StatusCode::kNotFound, "steps[0].session_id");
  code_and(0, {}, absl::StatusCode::kInvalidArgument, "steps");
  // A step in flight makes the session busy for every other call.
  absl::StatusOr<StepPlan> plan = h.registry().BeginStep(h.lease(), kOwner, 0, {{s, 3}});
  ASSERT_TRUE(plan.ok());
  code_and(1, {{s, 1}}, absl::StatusCode::kFailedPrecondition, "in flight");
  EXPECT_EQ(h.registry().Fork(h.lease(), kOwner, s).status().code(),
            absl::StatusCode::kFailedPrecondition);
  h.registry().EndStep(*plan, false);  // failed: nothing appended, pages back
  absl::StatusOr<std::vector<SessionSnapshot>> list = h.registry().List(h.lease(), kOwner);
  for (const SessionSnapshot& snap : *list) EXPECT_EQ(snap.pages, 0);
  // Bad geometry.
  SessionGeometry g = Geometry(1, 4, 3, 64, 10);
  EXPECT_NE(h.registry().Open(h.lease(), kOwner, g).status().message().find("kv_num_heads"),
            std::string::npos);
  g = Geometry(0, 4, 2, 64, 10);
  EXPECT_NE(h.registry().Open(h.lease(), kOwner, g).status().message().find("num_layers"),
            std::string::npos);
  g = Geometry(1, 4, 4, 512, 10);  // 4 KiB rows in 2 KiB half pages
  EXPECT_NE(h.registry().Open(h.lease(), kOwner, g).status().message().find("--kv_page_bytes"),
            std::string::npos);
}

TEST(SessionRegistryTest, LeasesBelongToTheirOwner) {
  Harness h(64, 8 * 2 * 64 * 2 * 2);
  const std::string s = h.Open(Geometry(1, 4, 2, 64, 100));
  EXPECT_EQ(h.registry().List(h.lease(), "someone else").status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(h.registry().BeginStep(h.lease(), "someone else", 0, {{s, 1}}).status().code(),
            absl::StatusCode::kPermissionDenied);
  const std::string other = h.registry().OpenLease(kOwner);
  EXPECT_EQ(h.registry().BeginStep(other, kOwner, 0, {{s, 1}}).status().code(),
            absl::StatusCode::kNotFound);  // not in that lease
  EXPECT_EQ(h.registry().List("no such lease", kOwner).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(SessionRegistryTest, LeaseEndAndExpiryFreeEveryPage) {
  SessionLimits limits;
  limits.idle_timeout = absl::Seconds(30);
  Harness h(64, 8 * 2 * 64 * 2 * 2, limits);
  const std::string a = h.Open(Geometry(2, 4, 2, 64, 100));
  ASSERT_TRUE(h.Step(0, {{a, 20}}).ok());
  EXPECT_EQ(h.registry().ExpireIdle(absl::Now()), 0);
  EXPECT_EQ(h.registry().ExpireIdle(absl::Now() + absl::Seconds(31)), 1);
  EXPECT_EQ(h.registry().counters().expired, 1);
  EXPECT_EQ(h.registry().pool().pages_used(), 0);
  const std::string b = h.Open(Geometry(2, 4, 2, 64, 100));
  ASSERT_TRUE(h.Step(0, {{b, 20}}).ok());
  // A closed session with a step in flight keeps its pages until it ends.
  absl::StatusOr<StepPlan> plan = h.registry().BeginStep(h.lease(), kOwner, 1, {{b, 9}});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(h.registry().EndLease(h.lease()), 1);
  EXPECT_GT(h.registry().pool().pages_used(), 0);
  h.registry().EndStep(*plan, true);
  EXPECT_EQ(h.registry().pool().pages_used(), 0);
  EXPECT_EQ(h.registry().counters().sessions, 0);
}

}  // namespace
}  // namespace attn::server
