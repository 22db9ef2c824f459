// DeviceBuffer in a build without CUDA: there is none.
#include "device_buffer.h"

namespace attn::loadgen {

absl::StatusOr<std::unique_ptr<DeviceBuffer>> DeviceBuffer::Allocate(int, int64_t) {
  return absl::FailedPreconditionError(
      "this attn_loadgen was built without CUDA: --shared_memory=cuda needs a CUDA build");
}

}  // namespace attn::loadgen
