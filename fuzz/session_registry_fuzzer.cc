// fuzz/session_registry_fuzzer.cc
//
// The KV-cache session registry (server/sessions/) under arbitrary
// sequences of calls: open (grown or reserved), steps of one to three
// sessions that succeed or fail, fork, truncate, close and lease ends, over a
// pool of few pages so that it is often full. Each input byte picks the next
// call and its arguments. A model of page memory (the token each slot
// holds) stands in for the kernel: a successful step writes its new tokens
// through the block table, and the registry's page copy copies slots.
//
// Asserted, for every input:
//   1. a step's block table names pages of the pool, and its cached lengths
//      are the model's; every cached token read through the block table is
//      the one the model says that session appended (so no session ever
//      wrote a page another session reads: copy-on-write holds);
//   2. refusals are INVALID_ARGUMENT, RESOURCE_EXHAUSTED, NOT_FOUND or
//      FAILED_PRECONDITION with a message; a refused or failed step changes
//      no length;
//   3. the registry's counters agree with the model (sessions, tokens
//      cached), and the pages used never exceed the pool;
//   4. once the lease ends, every page is free again.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "fuzz_check.h"
#include "sessions/page_pool.h"
#include "sessions/session_registry.h"

namespace {

using attn::server::PagePool;
using attn::server::SessionGeometry;
using attn::server::SessionLimits;
using attn::server::SessionRegistry;
using attn::server::StepEntry;
using attn::server::StepPlan;

constexpr int64_t kPages = 24;
constexpr int64_t kLayers = 2;
// bf16, 1 KV head of 8: 16-byte rows; 512-byte pages hold 16 tokens a layer.
constexpr int64_t kPageBytes = 512;
constexpr int64_t kPageTokens = 16;

class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return at_ >= size_; }
  uint8_t Next() { return at_ < size_ ? data_[at_++] : 0; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

struct Harness {
  // The token each slot of each page holds (-1: never written).
  std::vector<std::vector<int32_t>> memory =
      std::vector<std::vector<int32_t>>(kPages, std::vector<int32_t>(kPageTokens, -1));
  // Per open session, per layer: the tokens appended, in order.
  std::map<std::string, std::vector<std::vector<int32_t>>> model;
  std::vector<std::string> ids;  // open sessions, in opening order
  int32_t next_token = 0;
  std::unique_ptr<SessionRegistry> registry;
  std::string lease;

  Harness() {
    SessionLimits limits;
    limits.page_bytes = kPageBytes;
    limits.max_session_tokens = 1000;
    limits.max_steps_per_call = 3;
    limits.max_sessions_per_lease = 8;
    registry = std::make_unique<SessionRegistry>(
        limits, std::make_unique<PagePool>(kPages),
        [this](int32_t dst, int32_t src, int64_t bytes) {
          FUZZ_CHECK(dst >= 0 && dst < kPages && src >= 0 && src < kPages && dst != src,
                     "copy %d -> %d", src, dst);
          const int64_t slots = bytes / 16;
          FUZZ_CHECK(slots >= 0 && slots <= kPageTokens, "copy of %lld bytes",
                     static_cast<long long>(bytes));
          for (int64_t i = 0; i < slots; ++i) memory[dst][i] = memory[src][i];
          return absl::OkStatus();
        });
    lease = registry->OpenLease("fuzz");
  }

  const std::string* Pick(uint8_t byte) const {
    return ids.empty() ? nullptr : &ids[byte % ids.size()];
  }

  void Forget(const std::string& id) {
    model.erase(id);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] == id) {
        ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
    }
  }

  void Open(Input& in) {
    SessionGeometry g;
    g.num_layers = kLayers;
    g.heads_q = 2;
    g.heads_kv = 1;
    g.head_dim = 8;
    g.max_tokens = 1 + in.Next() % 96;
    g.reserve = (in.Next() & 1) != 0;
    auto opened = registry->Open(lease, "fuzz", g);
    if (!opened.ok()) return attn::fuzz::CheckDocumentedRefusal(opened.status());
    FUZZ_CHECK(opened->page_tokens == kPageTokens, "page_tokens %lld",
               static_cast<long long>(opened->page_tokens));
    ids.push_back(opened->session_id);
    model[opened->session_id] = std::vector<std::vector<int32_t>>(kLayers);
  }

  void Step(Input& in) {
    const int64_t layer = in.Next() % (kLayers + 1);  // kLayers: out of range
    const int count = 1 + in.Next() % 3;
    std::vector<StepEntry> steps;
    for (int i = 0; i < count; ++i) {
      const std::string* id = Pick(in.Next());
      const int64_t tokens = in.Next() % 40;  // 0: refused
      if (id != nullptr) steps.push_back({*id, tokens});
    }
    if (steps.empty()) return;
    auto plan = registry->BeginStep(lease, "fuzz", layer, steps);
    if (!plan.ok()) return attn::fuzz::CheckDocumentedRefusal(plan.status());
    const size_t layer_index = static_cast<size_t>(layer);
    FUZZ_CHECK(layer >= 0 && layer < kLayers, "a step of layer %lld ran",
               static_cast<long long>(layer));
    FUZZ_CHECK(plan->page_tokens == kPageTokens, "plan page_tokens");
    for (size_t i = 0; i < steps.size(); ++i) {
      const std::vector<int32_t>& cached = model.at(steps[i].session_id)[layer_index];
      FUZZ_CHECK(plan->cache_seqlens[i] == static_cast<int32_t>(cached.size()),
                 "step %zu: the registry caches %d tokens, the model %zu", i,
                 plan->cache_seqlens[i], cached.size());
      const int64_t n = plan->cu_seqlens_q[i + 1] - plan->cu_seqlens_q[i];
      FUZZ_CHECK(n == steps[i].tokens, "step %zu: %lld new tokens, asked %lld", i,
                 static_cast<long long>(n), static_cast<long long>(steps[i].tokens));
      const int32_t* row = &plan->block_table[i * static_cast<size_t>(plan->max_pages_per_seq)];
      for (int64_t t = 0; t < static_cast<int64_t>(cached.size()) + n; ++t) {
        FUZZ_CHECK(t / kPageTokens < plan->max_pages_per_seq, "block table too narrow");
        const int32_t page = row[t / kPageTokens];
        FUZZ_CHECK(page >= 0 && page < kPages, "block table entry %d", page);
        int32_t& slot = memory[page][t % kPageTokens];
        if (t < static_cast<int64_t>(cached.size())) {
          FUZZ_CHECK(slot == cached[static_cast<size_t>(t)],
                     "cached token %lld of a session reads %d, appended %d",
                     static_cast<long long>(t), slot, cached[static_cast<size_t>(t)]);
        }
      }
    }
    const bool succeeds = (in.Next() % 4) != 0;
    if (succeeds) {  // the kernel's append
      for (size_t i = 0; i < steps.size(); ++i) {
        std::vector<int32_t>& cached = model.at(steps[i].session_id)[layer_index];
        const int32_t* row = &plan->block_table[i * static_cast<size_t>(plan->max_pages_per_seq)];
        for (int64_t t = 0; t < steps[i].tokens; ++t) {
          const int64_t at = static_cast<int64_t>(cached.size());
          memory[row[at / kPageTokens]][at % kPageTokens] = next_token;
          cached.push_back(next_token++);
        }
      }
    }
    registry->EndStep(*plan, succeeds);
  }

  void Fork(Input& in) {
    const std::string* id = Pick(in.Next());
    if (id == nullptr) return;
    auto child = registry->Fork(lease, "fuzz", *id);
    if (!child.ok()) return attn::fuzz::CheckDocumentedRefusal(child.status());
    const std::vector<std::vector<int32_t>> copy = model.at(*id);
    ids.push_back(child->session_id);
    model[child->session_id] = copy;
  }

  void Truncate(Input& in) {
    const std::string* id = Pick(in.Next());
    if (id == nullptr) return;
    const int64_t tokens = in.Next() % 24;
    const std::string session = *id;
    auto cut = registry->Truncate(lease, "fuzz", session, tokens);
    if (!cut.ok()) return attn::fuzz::CheckDocumentedRefusal(cut.status());
    for (std::vector<int32_t>& layer : model.at(session)) {
      FUZZ_CHECK(static_cast<int64_t>(layer.size()) >= tokens, "truncated past the start");
      layer.resize(layer.size() - static_cast<size_t>(tokens));
    }
  }

  void Close(Input& in) {
    const std::string* id = Pick(in.Next());
    if (id == nullptr) return;
    const std::string session = *id;
    const absl::Status closed = registry->Close(lease, "fuzz", session);
    FUZZ_CHECK(closed.ok(), "%s", closed.ToString().c_str());
    Forget(session);
  }

  void CheckCounters() const {
    const SessionRegistry::Counters c = registry->counters();
    int64_t tokens = 0;
    for (const auto& [id, layers] : model) {
      for (const auto& layer : layers) tokens += static_cast<int64_t>(layer.size());
    }
    FUZZ_CHECK(c.sessions == static_cast<int64_t>(model.size()), "%lld sessions, model %zu",
               static_cast<long long>(c.sessions), model.size());
    FUZZ_CHECK(c.tokens_cached == tokens, "%lld tokens cached, model %lld",
               static_cast<long long>(c.tokens_cached), static_cast<long long>(tokens));
    const int64_t used = registry->pool().pages_used();
    FUZZ_CHECK(used >= 0 && used <= kPages, "%lld pages used", static_cast<long long>(used));
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  Harness h;
  for (int calls = 0; !in.empty() && calls < 200; ++calls) {
    switch (in.Next() % 6) {
      case 0: h.Open(in); break;
      case 1:
      case 2: h.Step(in); break;
      case 3: h.Fork(in); break;
      case 4: h.Truncate(in); break;
      default: h.Close(in); break;
    }
    h.CheckCounters();
  }
  const int64_t closed = h.registry->EndLease(h.lease);
  FUZZ_CHECK(closed == static_cast<int64_t>(h.model.size()), "the lease closed %lld of %zu",
             static_cast<long long>(closed), h.model.size());
  FUZZ_CHECK(h.registry->pool().pages_used() == 0, "%lld pages still used after the lease",
             static_cast<long long>(h.registry->pool().pages_used()));
  return 0;
}
