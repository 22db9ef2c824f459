#include "system_shared_memory.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"

namespace attn::cli {
namespace {

constexpr int64_t kAlignment = 64;  // the server takes offsets that are multiples of 16
constexpr char kRegionName[] = "attn_cli";

int64_t Aligned(int64_t offset) { return (offset + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

absl::StatusOr<SystemShmCall> PlaceInSystemSharedMemory(AttentionClient& client,
                                                        const AttentionInputs& inputs,
                                                        const AttendOptions& options) {
  const absl::string_view tensors[3] = {inputs.QData(), inputs.KData(), inputs.VData()};
  int64_t offsets[5];  // q, k, v, out, lse
  const int64_t sizes[5] = {inputs.QBytes(), inputs.KvBytes(), inputs.KvBytes(), inputs.QBytes(),
                            options.return_lse ? inputs.LseElements() * 4 : 0};
  int64_t end = 0;
  for (int i = 0; i < 5; ++i) {
    offsets[i] = Aligned(end);
    end = offsets[i] + sizes[i];
  }
  absl::StatusOr<std::unique_ptr<SharedMemory>> memory = SharedMemory::Create(end);
  if (!memory.ok()) return memory.status();
  for (int i = 0; i < 3; ++i) {
    std::memcpy((*memory)->data() + offsets[i], tensors[i].data(), tensors[i].size());
  }
  absl::StatusOr<attnserve::v1::RegionInfo> region =
      client.RegisterSystemRegion(kRegionName, (*memory)->name(), 0, (*memory)->size());
  if (!region.ok()) return region.status();

  SystemShmCall call;
  call.memory = *std::move(memory);
  call.region = *std::move(region);
  call.inputs = inputs;
  std::string().swap(call.inputs.q);  // the tensors go by reference
  std::string().swap(call.inputs.k);
  std::string().swap(call.inputs.v);
  call.inputs.borrowed_q = call.inputs.borrowed_k = call.inputs.borrowed_v = {};
  const std::string& id = call.region.region_id();
  call.inputs.q_ref = {id, offsets[0], sizes[0]};
  call.inputs.k_ref = {id, offsets[1], sizes[1]};
  call.inputs.v_ref = {id, offsets[2], sizes[2]};
  call.options = options;
  call.options.out_ref = {id, offsets[3], sizes[3]};
  if (options.return_lse) call.options.lse_ref = {id, offsets[4], sizes[4]};
  return call;
}

void TakeOutputs(const SystemShmCall& call, AttendResult* result) {
  const char* base = call.memory->data();
  const TensorRef& out = call.options.out_ref;
  result->out.assign(base + out.offset, static_cast<size_t>(out.byte_size));
  const TensorRef& lse = call.options.lse_ref;
  result->lse.resize(static_cast<size_t>(lse.byte_size) / sizeof(float));
  if (lse.set())
    std::memcpy(result->lse.data(), base + lse.offset, static_cast<size_t>(lse.byte_size));
}

std::string Describe(const SystemShmCall& call) {
  return absl::StrFormat("%s, %.2f MiB, region %s (%s…)", call.memory->name(),
                         static_cast<double>(call.memory->size()) / (1 << 20), call.region.name(),
                         call.region.region_id().substr(0, 8));
}

}  // namespace attn::cli
