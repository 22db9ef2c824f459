#include "backends/cuda_routing.h"

#include <algorithm>
#include <atomic>
#include <limits>

#include "core/log.h"

namespace attn::server {
namespace {

// How a message tensor reaches the device. From the heap when the arena
// holds at least half its bytes (the rest staged piece by piece); a tensor
// mostly outside (a full arena) is staged whole, by the copy threads in a
// few large chunks rather than piece by piece.
enum class MessageRoute { kStagedWhole, kThroughRing, kFromHeap };

MessageRoute RouteOf(const TensorSource& tensor, const CudaSlot& slot) {
  if (slot.heap().has_value() && 2 * slot.heap()->BytesInside(tensor) >= tensor.size()) {
    return MessageRoute::kFromHeap;
  }
  return slot.ring() != nullptr ? MessageRoute::kThroughRing : MessageRoute::kStagedWhole;
}

// Appends `copy`, merged into the last one when it continues it (the
// stacked parts of a batch staged whole go in one DMA).
void AddCopy(std::vector<DeviceCopy>* copies, const DeviceCopy& copy) {
  if (copy.bytes == 0) return;
  if (!copies->empty()) {
    DeviceCopy& last = copies->back();
    if (last.kind == copy.kind && static_cast<char*>(last.to) + last.bytes == copy.to &&
        static_cast<const char*>(last.from) + last.bytes == copy.from) {
      last.bytes += copy.bytes;
      return;
    }
  }
  copies->push_back(copy);
}

// Lists in `heap` the copies that bring `tensor`, mostly in the arena, to
// `device`: one per piece in the arena (gRPC 1.51 reads sockets into
// separate 64 KiB slices, and each block of the arena has its header in
// front, so no two pieces are ever adjacent: about 770 copies for 48 MiB),
// and one per run of consecutive pieces outside it (a short read's small
// slice, one that found the arena full), which go through `staged` at
// their offsets: their staging copies are added to `staging`.
void ListHeapCopies(const TensorSource& tensor, const HeapArena& arena, char* staged, char* device,
                    H2DBatch* heap, std::vector<ParallelCopier::Task>* staging) {
  size_t offset = 0;
  size_t staged_from = 0, staged_bytes = 0;  // the run of staged pieces so far
  for (absl::string_view piece : tensor.pieces()) {
    if (arena.Contains(piece)) {
      heap->Add(device + staged_from, staged + staged_from, staged_bytes);
      staged_bytes = 0;
      heap->Add(device + offset, piece.data(), piece.size());
    } else {
      staging->push_back({&tensor, staged + offset, static_cast<int64_t>(offset),
                          static_cast<int64_t>(piece.size())});
      if (staged_bytes == 0) staged_from = offset;
      staged_bytes += piece.size();
    }
    offset += piece.size();
  }
  heap->Add(device + staged_from, staged + staged_from, staged_bytes);
}

// With the pinned heap armed, a tensor that was staged anyway: logged once
// per process, with what tells the two causes apart (pieces below the
// heap's threshold, or an arena too full for the requests in flight).
void WarnOnceOfHeapMiss(const TensorSource& tensor, const CudaSlot& slot) {
  static std::atomic<bool> warned{false};
  if (warned.exchange(true)) return;
  int outside = 0;
  size_t smallest = std::numeric_limits<size_t>::max();
  for (absl::string_view piece : tensor.pieces()) {
    if (!slot.heap()->Contains(piece)) {
      ++outside;
      smallest = std::min(smallest, piece.size());
    }
  }
  LOGF(kWarning,
       "%s: %d of the %d pieces of a %d-byte tensor lay outside the pinned heap's arena (the "
       "smallest %d bytes), more than half its bytes, so it was staged whole: an arena "
       "(--pinned_heap_bytes) too small for the requests in flight, or pieces below its 64 KiB "
       "threshold. Logged once.",
       slot.name(), outside, tensor.pieces().size(), tensor.size(), smallest);
}

// Routes `input`'s parts into the slot's buffer (or leaves a lone device
// region in place); returns what the kernel reads.
const void* RouteInput(const LaunchPlan& plan, Input input, CudaSlot& slot, CudaRoute* r) {
  if (const TensorSource* lone = plan.LoneSource(input); lone != nullptr && lone->on_device()) {
    return lone->data();
  }
  char* const device = slot.device_input(input);
  char* const staged = slot.staged_input(input);
  for (const InputPart& part : plan.inputs(input)) {
    const TensorSource& source = *part.source;
    char* const to = device + part.offset;
    switch (source.kind()) {
      case SourceKind::kDeviceRegion:
        AddCopy(&r->in, {to, source.data(), source.size(), cudaMemcpyDeviceToDevice});
        break;
      case SourceKind::kSystemRegion:
        AddCopy(&r->in, {to, source.data(), source.size(), cudaMemcpyHostToDevice});
        break;
      case SourceKind::kMessage: {
        const MessageRoute route = RouteOf(source, slot);
        if (route != MessageRoute::kFromHeap && slot.heap().has_value()) {
          WarnOnceOfHeapMiss(source, slot);
        }
        switch (route) {
          case MessageRoute::kFromHeap:
            ListHeapCopies(source, *slot.heap(), staged + part.offset, to, &slot.heap_copies(),
                           &r->staging);
            r->from_heap = true;
            break;
          case MessageRoute::kThroughRing:
            r->ring.push_back({&source, to});
            break;
          case MessageRoute::kStagedWhole:
            r->staging.push_back({&source, staged + part.offset});
            AddCopy(&r->in, {to, staged + part.offset, source.size(), cudaMemcpyHostToDevice});
            break;
        }
        break;
      }
    }
  }
  return device;
}

// Routes one output's parts from the kernel's `written` (the slot's
// `device` buffer, or a lone device region itself) to their destinations;
// `lent_at(i)` is job i's lent range for this output, or null.
template <typename LentAt>
void RouteOutput(const std::vector<OutputPart>& parts, const char* written, char* staged,
                 LentAt lent_at, CudaRoute* r) {
  for (size_t i = 0; i < parts.size(); ++i) {
    const OutputPart& part = parts[i];
    TensorDestination& destination = *part.destination;
    if (written == destination.data) continue;  // a lone device region, written in place
    const char* from = written + part.offset;
    switch (destination.kind) {
      case DestinationKind::kDeviceRegion:
        AddCopy(&r->back, {destination.data, from, part.bytes, cudaMemcpyDeviceToDevice});
        break;
      case DestinationKind::kSystemRegion:
        AddCopy(&r->back, {destination.data, from, part.bytes, cudaMemcpyDeviceToHost});
        break;
      case DestinationKind::kResponse:
        if (char* lent = lent_at(i); lent != nullptr) {
          AddCopy(&r->back, {lent, from, part.bytes, cudaMemcpyDeviceToHost});
          break;
        }
        [[fallthrough]];  // nothing lent: through staging, as kHost
      case DestinationKind::kHost:
        AddCopy(&r->back, {staged + part.offset, from, part.bytes, cudaMemcpyDeviceToHost});
        r->unstage.push_back({destination.host, staged + part.offset, part.bytes});
        break;
    }
  }
}

}  // namespace

CudaRoute RoutePlan(const LaunchPlan& plan, CudaSlot& slot) {
  CudaRoute r;
  slot.heap_copies().Clear();
  r.q = RouteInput(plan, Input::kQ, slot, &r);
  r.k = RouteInput(plan, Input::kK, slot, &r);
  r.v = RouteInput(plan, Input::kV, slot, &r);

  const bool lse = plan.spec().problem.return_lse;
  TensorDestination* lone_out = plan.LoneOut();
  TensorDestination* lone_lse = plan.LoneLse();
  r.out = lone_out != nullptr && lone_out->on_device() ? lone_out->data : slot.device_out();
  if (lse) {
    r.lse = reinterpret_cast<float*>(lone_lse != nullptr && lone_lse->on_device()
                                         ? lone_lse->data
                                         : slot.device_lse());
  }
  // A range of pinned memory for each job whose outputs all go into the
  // response, when the pool has one that large.
  std::vector<PinnedOutputPool::Lent*> lent(plan.jobs().size(), nullptr);
  for (size_t j = 0; j < plan.jobs().size(); ++j) {
    Job* job = plan.jobs()[j];
    if (!job->MayLendOutputs()) continue;
    std::unique_ptr<PinnedOutputPool::Lent> range = slot.lent_outputs().Take(
        static_cast<size_t>(job->spec.QBytes()), lse ? static_cast<size_t>(job->spec.LseBytes()) : 0);
    if (range == nullptr) continue;
    lent[j] = range.get();
    r.lent.emplace_back(job, std::move(range));
  }
  RouteOutput(plan.out(), static_cast<const char*>(r.out), slot.staged_out(),
              [&](size_t j) { return lent[j] != nullptr ? lent[j]->data() : nullptr; }, &r);
  if (lse) {
    RouteOutput(plan.lse(), reinterpret_cast<const char*>(r.lse), slot.staged_lse(),
                [&](size_t j) { return lent[j] != nullptr ? lent[j]->lse_data() : nullptr; }, &r);
  }
  return r;
}

}  // namespace attn::server
