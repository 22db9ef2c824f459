// ChunkedUpload (server/backends/chunked_upload.h) on a GPU: tensors of many
// uneven pieces reach device memory byte for byte through rings of every
// shape, two uploads back to back reuse the slots without a sync between
// them, and nothing past the ring is written. Skips without a GPU.
#include <cuda_runtime.h>

#include <cstring>
#include <deque>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backends/chunked_upload.h"
#include "backends/parallel_copier.h"
#include "cuda_test_util.h"
#include "gtest/gtest.h"
#include "core/tensor_place.h"

namespace attn::testing {
namespace {

#define ASSERT_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call

std::string RandomBytes(size_t n, std::mt19937& rng) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// One upload's tensors: pieces of random sizes (some empty tensors, some one
// byte, some several MiB), their concatenations and device memory for them.
struct Tensors {
  std::deque<std::string> pieces;  // never moved: the views point into them
  std::vector<server::TensorSource> bytes;
  std::vector<std::string> expected;
  std::vector<void*> device;

  Tensors(const std::vector<size_t>& sizes, std::mt19937& rng) {
    for (size_t size : sizes) {
      std::string whole;
      server::TensorSource t;
      size_t left = size;
      while (left > 0) {
        const size_t piece = std::min(left, size_t{1} + rng() % (size_t{1} << 20));
        pieces.push_back(RandomBytes(piece, rng));
        t.Append(pieces.back());
        whole += pieces.back();
        left -= piece;
      }
      bytes.push_back(t);
      expected.push_back(std::move(whole));
      void* d = nullptr;
      EXPECT_EQ(cudaMalloc(&d, std::max<size_t>(size, 1)), cudaSuccess);
      EXPECT_EQ(cudaMemset(d, 0xab, std::max<size_t>(size, 1)), cudaSuccess);
      device.push_back(d);
    }
  }
  ~Tensors() {
    for (void* d : device) cudaFree(d);
  }
  std::vector<server::ChunkedUpload::Tensor> ToUpload() const {
    std::vector<server::ChunkedUpload::Tensor> out;
    for (size_t i = 0; i < bytes.size(); ++i) out.push_back({&bytes[i], device[i]});
    return out;
  }
};

TEST(ChunkedUploadTest, EveryByteArrivesThroughRingsOfEveryShape) {
  ATTN_SKIP_WITHOUT_GPU();
  ASSERT_CUDA(cudaSetDevice(0));
  cudaStream_t stream = nullptr;
  ASSERT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  constexpr size_t kGuard = 4096;
  std::mt19937 rng(17);
  for (int helpers : {0, 2}) {
    server::ParallelCopier copier(helpers, std::numeric_limits<size_t>::max());
    for (size_t slot_bytes : {size_t{256}, size_t{4096} + 256, size_t{1} << 20}) {
      for (int slots : {1, 2, 4}) {
        const size_t ring_bytes = slot_bytes * static_cast<size_t>(slots);
        char* ring = nullptr;
        ASSERT_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&ring), ring_bytes + kGuard,
                                  cudaHostAllocDefault));
        std::memset(ring + ring_bytes, 0x5a, kGuard);
        auto upload = server::ChunkedUpload::Create(ring, slot_bytes, slots, 0, &copier);
        ASSERT_TRUE(upload.ok()) << upload.status();
        // Sizes on both sides of the slot size, one byte, none, several MiB.
        const std::vector<size_t> sizes = {slot_bytes - 1, 0, 1, slot_bytes,
                                           (size_t{3} << 20) + 7, slot_bytes + 1};
        Tensors first(sizes, rng), second(sizes, rng);
        // Both enqueued before any sync: the second waits for its slots.
        ASSERT_TRUE((*upload)->Enqueue(first.ToUpload(), stream).ok());
        ASSERT_TRUE((*upload)->Enqueue(second.ToUpload(), stream).ok());
        ASSERT_CUDA(cudaStreamSynchronize(stream));
        for (const Tensors* t : {&first, &second}) {
          for (size_t i = 0; i < sizes.size(); ++i) {
            std::string back(sizes[i], '\0');
            ASSERT_CUDA(cudaMemcpy(back.data(), t->device[i], sizes[i], cudaMemcpyDeviceToHost));
            EXPECT_TRUE(back == t->expected[i])
                << "tensor " << i << " of " << sizes[i] << " bytes, " << slots << " slots of "
                << slot_bytes << ", " << helpers << " helpers";
          }
        }
        EXPECT_EQ(std::string(ring + ring_bytes, kGuard), std::string(kGuard, '\x5a'))
            << "written past the ring of " << slots << " x " << slot_bytes;
        upload->reset();
        ASSERT_CUDA(cudaFreeHost(ring));
      }
    }
  }
  ASSERT_CUDA(cudaStreamDestroy(stream));
}

TEST(ChunkedUploadTest, RefusesAnEmptyRing) {
  server::ParallelCopier copier(0, std::numeric_limits<size_t>::max());
  char byte = 0;
  EXPECT_FALSE(server::ChunkedUpload::Create(&byte, 0, 4, 0, &copier).ok());
  EXPECT_FALSE(server::ChunkedUpload::Create(&byte, 256, 0, 0, &copier).ok());
  EXPECT_FALSE(server::ChunkedUpload::Create(nullptr, 256, 4, 0, &copier).ok());
}

}  // namespace
}  // namespace attn::testing
