#include "session_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "attn/dtype.h"

namespace attn::tools {
namespace {

namespace pb = ::attnserve::v1;

float Unpack(const std::string& bytes, size_t index) {
  const uint16_t bits = static_cast<uint16_t>(static_cast<uint8_t>(bytes[2 * index]) |
                                              (static_cast<uint8_t>(bytes[2 * index + 1]) << 8));
  return Bf16BitsToFloat(bits);
}

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

SessionModel::SessionModel(uint32_t seed) : rng_state_(seed), bf16_of_draw_(1 << 16) {
  for (size_t i = 0; i < bf16_of_draw_.size(); ++i) {
    bf16_of_draw_[i] = FloatToBf16Bits(-1.0f + (static_cast<float>(i) + 0.5f) / 32768.0f);
  }
}

std::string SessionModel::RandomBf16(size_t count) {
  std::string bytes(count * 2, '\0');
  char* out = bytes.data();
  for (size_t i = 0; i < count; i += 4) {
    uint64_t draw = SplitMix64(rng_state_);
    for (size_t j = i; j < std::min(count, i + 4); ++j, draw >>= 16) {
      const uint16_t bits = bf16_of_draw_[draw & 0xFFFF];
      out[2 * j] = static_cast<char>(bits & 0xFF);
      out[2 * j + 1] = static_cast<char>(bits >> 8);
    }
  }
  return bytes;
}

void SessionModel::Add(const std::string& id, const Geometry& g) {
  histories_[id] = History{g, std::vector<std::vector<float>>(static_cast<size_t>(g.layers)),
                           std::vector<std::vector<float>>(static_cast<size_t>(g.layers))};
}

void SessionModel::Fork(const std::string& parent, const std::string& child) {
  histories_[child] = histories_.at(parent);
}

void SessionModel::Truncate(const std::string& id, int64_t tokens) {
  History& h = histories_.at(id);
  const size_t row = static_cast<size_t>(h.g.hkv * h.g.d);
  for (auto* layers : {&h.k, &h.v}) {
    for (std::vector<float>& t : *layers) t.resize(t.size() - static_cast<size_t>(tokens) * row);
  }
}

int64_t SessionModel::Tokens(const std::string& id, int64_t layer) const {
  const History& h = histories_.at(id);
  return static_cast<int64_t>(h.k[static_cast<size_t>(layer)].size()) / (h.g.hkv * h.g.d);
}

pb::AttendSessionsRequest SessionModel::NewStep(
    int64_t layer, const std::vector<std::pair<std::string, int64_t>>& steps) {
  const Geometry& g = histories_.at(steps.front().first).g;
  int64_t n = 0;
  for (const auto& s : steps) n += s.second;
  pb::AttendSessionsRequest request;
  request.set_layer(static_cast<int32_t>(layer));
  for (const auto& s : steps) {
    pb::SessionStep* step = request.add_steps();
    step->set_session_id(s.first);
    step->set_tokens(s.second);
  }
  request.set_q(RandomBf16(static_cast<size_t>(n * g.hq * g.d)));
  request.set_k(RandomBf16(static_cast<size_t>(n * g.hkv * g.d)));
  request.set_v(RandomBf16(static_cast<size_t>(n * g.hkv * g.d)));
  request.set_return_lse(true);
  return request;
}

double SessionModel::Check(const pb::AttendSessionsRequest& request,
                           const pb::AttendSessionsResponse& response) {
  const size_t layer = static_cast<size_t>(request.layer());
  int64_t n = 0;
  for (const pb::SessionStep& s : request.steps()) n += s.tokens();
  double worst = 0;
  int64_t begin = 0;
  for (int i = 0; i < request.steps_size(); ++i) {
    History& h = histories_.at(request.steps(i).session_id());
    const Geometry& g = h.g;
    const int64_t count = request.steps(i).tokens();
    const int64_t rk = g.hkv * g.d;
    std::vector<float>& hk = h.k[layer];
    std::vector<float>& hv = h.v[layer];
    const int64_t cached = static_cast<int64_t>(hk.size()) / rk;
    for (int64_t e = begin * rk; e < (begin + count) * rk; ++e) {
      hk.push_back(Unpack(request.k(), static_cast<size_t>(e)));
      hv.push_back(Unpack(request.v(), static_cast<size_t>(e)));
    }
    if (i >= response.layer_tokens_size() || response.layer_tokens(i) != cached + count) {
      worst = 1e9;
    }
    for (int64_t t = 0; t < count; ++t) {
      for (int64_t head = 0; head < g.hq; ++head) {
        const int64_t kh = head / (g.hq / g.hkv);
        const size_t q_at = static_cast<size_t>(((begin + t) * g.hq + head) * g.d);
        std::vector<double> s;
        double mx = -1e300;
        for (int64_t j = 0; j <= cached + t; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < g.d; ++e) {
            dot += double(Unpack(request.q(), q_at + static_cast<size_t>(e))) *
                   hk[static_cast<size_t>((j * g.hkv + kh) * g.d + e)];
          }
          s.push_back(dot / std::sqrt(double(g.d)));
          mx = std::max(mx, s.back());
        }
        double sum = 0;
        for (double& x : s) sum += (x = std::exp(x - mx));
        for (int64_t e = 0; e < g.d; ++e) {
          double o = 0;
          for (size_t j = 0; j < s.size(); ++j) {
            o += s[j] * hv[static_cast<size_t>((static_cast<int64_t>(j) * g.hkv + kh) * g.d + e)];
          }
          const size_t at = q_at + static_cast<size_t>(e);
          const double got =
              at < response.out().size() / 2 ? Unpack(response.out(), at) : std::nan("");
          worst = std::max(worst, std::isfinite(got) ? std::abs(got - o / sum) : 1e9);
        }
        if (request.return_lse()) {
          float lse = std::nanf("");
          const size_t lse_at = static_cast<size_t>(4 * (head * n + begin + t));
          if (lse_at + 4 <= response.lse().size()) {
            std::memcpy(&lse, response.lse().data() + lse_at, 4);
          }
          worst = std::max(worst, std::isfinite(lse) ? std::abs(lse - (mx + std::log(sum))) / 8
                                                     : 1e9);
        }
      }
    }
    begin += count;
  }
  return worst;
}

}  // namespace attn::tools
