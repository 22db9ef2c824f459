#include "backends/transport_only_executor.h"

#include <cstring>
#include <memory>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/output_poison.h"

namespace attn::server {
namespace {

constexpr char kNaNByte = static_cast<char>(kOutputPoisonByte);

// A prefix of the shared NaN bytes, lent as a job's O and LSE.
class NaNOutput : public OutputBuffer {
 public:
  NaNOutput(std::shared_ptr<const std::string> bytes, size_t out, size_t lse)
      : bytes_(std::move(bytes)), out_(out), lse_(lse) {}
  absl::string_view out() const override { return absl::string_view(*bytes_).substr(0, out_); }
  absl::string_view lse() const override { return absl::string_view(*bytes_).substr(0, lse_); }

 private:
  const std::shared_ptr<const std::string> bytes_;
  const size_t out_, lse_;
};

// O and the LSE in a buffer of their own, every byte NaN.
class FreshNaNOutput : public OutputBuffer {
 public:
  // Null when the memory cannot be had (the caller lends the shared bytes).
  static std::unique_ptr<FreshNaNOutput> Create(size_t out, size_t lse) {
    std::unique_ptr<char[]> bytes(new (std::nothrow) char[out + lse]);
    if (bytes == nullptr) return nullptr;
    std::memset(bytes.get(), kNaNByte, out + lse);
    return std::unique_ptr<FreshNaNOutput>(new FreshNaNOutput(std::move(bytes), out, lse));
  }
  absl::string_view out() const override { return absl::string_view(bytes_.get(), out_); }
  absl::string_view lse() const override { return absl::string_view(bytes_.get() + out_, lse_); }

 private:
  FreshNaNOutput(std::unique_ptr<char[]> bytes, size_t out, size_t lse)
      : bytes_(std::move(bytes)), out_(out), lse_(lse) {}
  const std::unique_ptr<char[]> bytes_;
  const size_t out_, lse_;
};

}  // namespace

TransportOnlyExecutor::TransportOnlyExecutor(int index,
                                             std::shared_ptr<const std::string> nan_bytes,
                                             bool fresh_outputs)
    : name_(absl::StrCat("transport_only worker ", index, " (no compute)")),
      nan_bytes_(std::move(nan_bytes)),
      fresh_outputs_(fresh_outputs) {}

absl::Status TransportOnlyExecutor::RunJob(Job& job) {
  const size_t out = static_cast<size_t>(job.spec.QBytes());
  const size_t lse = job.spec.problem.return_lse ? static_cast<size_t>(job.spec.LseBytes()) : 0;
  // Outputs in system regions get NaN there (CUDA regions are refused at
  // registration on this backend); the rest go into the response.
  const bool lend = job.MayLendOutputs();
  std::unique_ptr<OutputBuffer> lent;
  if (lend && fresh_outputs_) lent = FreshNaNOutput::Create(out, lse);
  if (lent == nullptr && lend && out <= nan_bytes_->size() && lse <= nan_bytes_->size()) {
    lent = std::make_unique<NaNOutput>(nan_bytes_, out, lse);
  }
  job.device = name_;
  if (lent != nullptr) {
    job.lent = std::move(lent);
    return absl::OkStatus();
  }
  const auto fill = [](TensorDestination& destination, size_t bytes) {
    if (destination.in_region()) {
      std::memset(destination.data, kNaNByte, bytes);
    } else if (destination.host != nullptr) {
      destination.host->assign(bytes, kNaNByte);
    }
  };
  fill(job.out, out);
  if (lse > 0) fill(job.lse, lse);
  return absl::OkStatus();
}

}  // namespace attn::server
