#include "backends/parallel_copier.h"

#include <algorithm>
#include <cstring>

#include "backends/streaming_copy.h"

namespace attn::server {
namespace {
// Large enough that taking a chunk costs nothing next to copying it, small
// enough that a 48 MiB request spreads over every thread.
constexpr size_t kChunkBytes = size_t{1} << 20;
}  // namespace

ParallelCopier::ParallelCopier(int helper_threads, size_t streaming_min_bytes)
    : streaming_min_bytes_(streaming_min_bytes) {
  for (int i = 0; i < helper_threads; ++i) helpers_.emplace_back([this] { HelperLoop(); });
}

ParallelCopier::~ParallelCopier() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : helpers_) t.join();
}

void ParallelCopier::Copy(const std::vector<Task>& tasks) {
  auto batch = std::make_shared<Batch>();
  size_t total = 0;
  for (const Task& task : tasks) {
    char* to = task.destination;
    // The part of each piece that lies in [task.offset, task.offset + count).
    size_t skip = static_cast<size_t>(task.offset);
    size_t left = static_cast<size_t>(task.count < 0 ? task.source->size() - task.offset
                                                       : task.count);
    for (absl::string_view piece : task.source->pieces()) {
      if (left == 0) break;
      if (skip >= piece.size()) {
        skip -= piece.size();
        continue;
      }
      piece.remove_prefix(skip);
      skip = 0;
      if (piece.size() > left) piece = piece.substr(0, left);
      left -= piece.size();
      for (size_t offset = 0; offset < piece.size(); offset += kChunkBytes) {
        const size_t bytes = std::min(kChunkBytes, piece.size() - offset);
        batch->chunks.push_back({piece.data() + offset, to, bytes});
        to += bytes;
        total += bytes;
      }
    }
  }
  batch->remaining = batch->chunks.size();
  batch->streaming = total >= streaming_min_bytes_;
  if (batch->chunks.empty()) return;
  if (!helpers_.empty() && batch->chunks.size() > 1) {
    absl::MutexLock lock(&mu_);
    pending_.push_back(batch);
  }
  Drain(batch);
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](Batch* b) { return b->remaining == 0; }, batch.get()));
}

void ParallelCopier::Drain(const std::shared_ptr<Batch>& batch) {
  while (true) {
    Chunk chunk;
    bool streaming;
    {
      absl::MutexLock lock(&mu_);
      if (batch->next == batch->chunks.size()) return;
      chunk = batch->chunks[batch->next++];
      streaming = batch->streaming;
      if (batch->next == batch->chunks.size()) {
        // Nothing more to take: helpers move on to the next batch.
        pending_.erase(std::remove(pending_.begin(), pending_.end(), batch), pending_.end());
      }
    }
    if (streaming) {
      CopyWithStreamingStores(chunk.to, chunk.from, chunk.bytes);
    } else {
      std::memcpy(chunk.to, chunk.from, chunk.bytes);
    }
    absl::MutexLock lock(&mu_);
    --batch->remaining;
  }
}

void ParallelCopier::HelperLoop() {
  while (true) {
    std::shared_ptr<Batch> batch;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](ParallelCopier* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) {
            return c->stopping_ || !c->pending_.empty();
          },
          this));
      if (stopping_) return;
      batch = pending_.front();
    }
    Drain(batch);
  }
}

}  // namespace attn::server
