#include "shared_memory_tensors.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"

namespace attn::loadgen {
namespace {

// Tensors start at multiples of this in their regions (the server needs 16).
constexpr int64_t kAlign = 256;
int64_t AlignUp(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

}  // namespace

absl::StatusOr<SharedMemoryKind> ParseSharedMemoryKind(const std::string& text) {
  if (text == "none" || text.empty()) return SharedMemoryKind::kNone;
  if (text == "system") return SharedMemoryKind::kSystem;
  if (text == "cuda") return SharedMemoryKind::kCuda;
  return absl::InvalidArgumentError(
      absl::StrFormat("--shared_memory is '%s'; it must be none, system or cuda", text));
}

absl::StatusOr<std::unique_ptr<SharedMemoryTensors>> SharedMemoryTensors::Create(
    SharedMemoryKind kind, int device, int slots, AttentionClient& client,
    AttentionInputs* inputs, const AttendOptions& call) {
  std::unique_ptr<SharedMemoryTensors> t(new SharedMemoryTensors());
  t->kind_ = kind;
  t->slots_ = slots;
  t->q_bytes_ = inputs->QBytes();
  t->lse_bytes_ = call.return_lse ? inputs->LseElements() * 4 : 0;
  t->slot_stride_ = AlignUp(t->q_bytes_) + AlignUp(t->lse_bytes_);
  const int64_t kv = inputs->KvBytes();
  const int64_t k_at = AlignUp(t->q_bytes_), v_at = k_at + AlignUp(kv);
  const int64_t in_bytes = v_at + AlignUp(kv);
  const int64_t out_bytes = t->slot_stride_ * slots;
  const absl::string_view tensors[3] = {inputs->QData(), inputs->KData(), inputs->VData()};
  const int64_t offsets[3] = {0, k_at, v_at};

  absl::StatusOr<attnserve::v1::RegionInfo> in_region, out_region;
  if (kind == SharedMemoryKind::kSystem) {
    absl::StatusOr<std::unique_ptr<SharedMemory>> in = SharedMemory::Create(in_bytes);
    if (!in.ok()) return in.status();
    absl::StatusOr<std::unique_ptr<SharedMemory>> out = SharedMemory::Create(out_bytes);
    if (!out.ok()) return out.status();
    t->system_in_ = *std::move(in);
    t->system_out_ = *std::move(out);
    for (int i = 0; i < 3; ++i) {
      std::memcpy(t->system_in_->data() + offsets[i], tensors[i].data(), tensors[i].size());
    }
    in_region = client.RegisterSystemRegion("loadgen-inputs", t->system_in_->name(), 0, in_bytes);
    if (!in_region.ok()) return in_region.status();
    out_region =
        client.RegisterSystemRegion("loadgen-outputs", t->system_out_->name(), 0, out_bytes);
  } else if (kind == SharedMemoryKind::kCuda) {
    absl::StatusOr<std::unique_ptr<DeviceBuffer>> in = DeviceBuffer::Allocate(device, in_bytes);
    if (!in.ok()) return in.status();
    absl::StatusOr<std::unique_ptr<DeviceBuffer>> out = DeviceBuffer::Allocate(device, out_bytes);
    if (!out.ok()) return out.status();
    t->device_in_ = *std::move(in);
    t->device_out_ = *std::move(out);
    for (int i = 0; i < 3; ++i) {
      if (absl::Status s = t->device_in_->CopyIn(offsets[i], tensors[i].data(),
                                                 static_cast<int64_t>(tensors[i].size()));
          !s.ok()) {
        return s;
      }
    }
    in_region = client.RegisterCudaRegion("loadgen-inputs", t->device_in_->IpcHandle(), device, 0,
                                          in_bytes);
    if (!in_region.ok()) return in_region.status();
    out_region = client.RegisterCudaRegion("loadgen-outputs", t->device_out_->IpcHandle(), device,
                                           0, out_bytes);
  } else {
    return absl::InvalidArgumentError("SharedMemoryTensors::Create without a kind");
  }
  if (!out_region.ok()) return out_region.status();
  t->out_region_id_ = out_region->region_id();

  inputs->q.clear();
  inputs->k.clear();
  inputs->v.clear();
  inputs->borrowed_q = inputs->borrowed_k = inputs->borrowed_v = absl::string_view();
  inputs->q_ref = {in_region->region_id(), 0, t->q_bytes_};
  inputs->k_ref = {in_region->region_id(), k_at, kv};
  inputs->v_ref = {in_region->region_id(), v_at, kv};
  return t;
}

std::vector<AttendOptions> SharedMemoryTensors::SlotCalls(const AttendOptions& call) const {
  std::vector<AttendOptions> calls;
  for (int i = 0; i < slots_; ++i) {
    AttendOptions c = call;
    const int64_t at = slot_stride_ * i;
    c.out_ref = {out_region_id_, at, q_bytes_};
    if (lse_bytes_ > 0) c.lse_ref = {out_region_id_, at + AlignUp(q_bytes_), lse_bytes_};
    calls.push_back(std::move(c));
  }
  return calls;
}

absl::Status SharedMemoryTensors::Read(int64_t offset, int64_t bytes, std::string* out) const {
  out->resize(static_cast<size_t>(bytes));
  if (system_out_ != nullptr) {
    std::memcpy(out->data(), system_out_->data() + offset, static_cast<size_t>(bytes));
    return absl::OkStatus();
  }
  return device_out_->CopyOut(offset, out->data(), bytes);
}

absl::StatusOr<std::string> SharedMemoryTensors::ReadOut(int slot) const {
  std::string bytes;
  if (absl::Status s = Read(slot_stride_ * slot, q_bytes_, &bytes); !s.ok()) return s;
  return bytes;
}

absl::StatusOr<std::string> SharedMemoryTensors::ReadLse(int slot) const {
  std::string bytes;
  if (absl::Status s = Read(slot_stride_ * slot + AlignUp(q_bytes_), lse_bytes_, &bytes); !s.ok()) {
    return s;
  }
  return bytes;
}

std::string SharedMemoryTensors::Describe() const {
  const bool system = kind_ == SharedMemoryKind::kSystem;
  return absl::StrFormat(
      "shared memory: %s regions, inputs %.1f MiB + %d output slots of %.1f MiB%s",
      system ? "system (POSIX shm)" : absl::StrFormat("CUDA IPC (cuda:%d)", device_in_->device()),
      (system ? system_in_->size() : device_in_->size()) / 1048576.0, slots_,
      slot_stride_ / 1048576.0, system ? "" : ", tensors never leave the GPU");
}

}  // namespace attn::loadgen
