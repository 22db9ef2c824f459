// bench/event_wait_latency.cu
//
// How late a host thread learns that the GPU finished, by the way it waits
// (the measurement behind attn_server's --spin_wait, server_options.h).
// Each run launches a kernel that busy-waits a given time on the GPU clock,
// then a device-to-host copy into pinned memory, as one stream of the server
// does for a step call, and waits for the copy's event. Lateness = the host's
// wall time from just before the launch to the wait's return, minus the
// device's time between an event recorded before the kernel and one after
// the copy: what the host lost in the wait (and the launch), not the work.
//
// Waits compared, each on fresh events of its own flags:
//   blocking   cudaEventSynchronize on a cudaEventBlockingSync event: the
//              thread sleeps until the driver wakes it (--nospin_wait)
//   spin       cudaEventQuery in a loop on the same kind of event: a core
//              busy for the whole wait (--spin_wait, the default)
//   hybrid     blocking wait on an event after the kernel, then spin on the
//              copy's: the core sleeps through the kernel
//
//   nvcc -O2 -arch=sm_90 -o event_wait_latency bench/event_wait_latency.cu
//   ./event_wait_latency [kernel_us=600] [copy_bytes=524288] [runs=290]
//
// A benchmark, not a test: it prints p50/p90/p99 of each wait's lateness in
// microseconds, the modes interleaved run by run so clocks and load drift
// alike for all three.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                    \
  do {                                                                                 \
    const cudaError_t e_ = (call);                                                     \
    if (e_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,               \
                   cudaGetErrorString(e_));                                            \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

// Busy-waits `cycles` SM clock cycles, then writes `out` (so the copy that
// follows reads something the kernel produced).
__global__ void SpinKernel(long long cycles, float* out, int n) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    out[i] = static_cast<float>(i);
  }
}

enum class Wait { kBlocking, kSpin, kHybrid };
const char* Name(Wait w) {
  return w == Wait::kBlocking ? "blocking" : w == Wait::kSpin ? "spin" : "hybrid";
}

struct Percentiles {
  double p50, p90, p99;
};
Percentiles Of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[static_cast<size_t>(q * (v.size() - 1))]; };
  return {at(0.5), at(0.9), at(0.99)};
}

int main(int argc, char** argv) {
  const double kernel_us = argc > 1 ? std::atof(argv[1]) : 600.0;
  const size_t copy_bytes = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : (512u << 10);
  const int runs = argc > 3 ? std::atoi(argv[3]) : 290;
  if (kernel_us <= 0 || copy_bytes < sizeof(float) || runs < 10) {
    std::fprintf(stderr, "usage: %s [kernel_us > 0] [copy_bytes >= 4] [runs >= 10]\n", argv[0]);
    return 2;
  }

  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  int clock_khz = 0;
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  const long long cycles = static_cast<long long>(kernel_us * clock_khz / 1000.0);
  const int n = static_cast<int>(copy_bytes / sizeof(float));

  float* device = nullptr;
  float* host = nullptr;
  CHECK(cudaMalloc(&device, copy_bytes));
  CHECK(cudaMallocHost(&host, copy_bytes));
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t start, kernel_done, copy_done;
  CHECK(cudaEventCreateWithFlags(&start, cudaEventBlockingSync));
  CHECK(cudaEventCreateWithFlags(&kernel_done, cudaEventBlockingSync));
  CHECK(cudaEventCreateWithFlags(&copy_done, cudaEventBlockingSync));

  const Wait modes[] = {Wait::kBlocking, Wait::kSpin, Wait::kHybrid};
  std::vector<double> late[3];
  const int warmup = 10;
  for (int r = 0; r < runs + warmup; ++r) {
    for (int m = 0; m < 3; ++m) {
      const auto t0 = std::chrono::steady_clock::now();
      CHECK(cudaEventRecord(start, stream));
      SpinKernel<<<prop.multiProcessorCount, 256, 0, stream>>>(cycles, device, n);
      CHECK(cudaGetLastError());
      CHECK(cudaEventRecord(kernel_done, stream));
      CHECK(cudaMemcpyAsync(host, device, copy_bytes, cudaMemcpyDeviceToHost, stream));
      CHECK(cudaEventRecord(copy_done, stream));
      cudaError_t state = cudaSuccess;
      switch (modes[m]) {
        case Wait::kBlocking:
          state = cudaEventSynchronize(copy_done);
          break;
        case Wait::kHybrid:
          CHECK(cudaEventSynchronize(kernel_done));
          [[fallthrough]];
        case Wait::kSpin:
          while ((state = cudaEventQuery(copy_done)) == cudaErrorNotReady) {
          }
          break;
      }
      CHECK(state);
      const auto t1 = std::chrono::steady_clock::now();
      if (host[n - 1] != static_cast<float>(n - 1)) {
        std::fprintf(stderr, "copy check failed: host[%d] = %g\n", n - 1, host[n - 1]);
        return 1;
      }
      host[n - 1] = -1.0f;  // poisoned for the next run
      float device_ms = 0;
      CHECK(cudaEventElapsedTime(&device_ms, start, copy_done));
      const double wall_us = std::chrono::duration<double, std::micro>(t1 - t0).count();
      if (r >= warmup) late[m].push_back(wall_us - device_ms * 1000.0);
    }
  }

  std::printf("# %s, kernel %.0f us + %zu-byte device-to-host copy, %d runs per wait\n",
              prop.name, kernel_us, copy_bytes, runs);
  std::printf("| wait | lateness p50 (us) | p90 | p99 |\n|---|---|---|---|\n");
  for (int m = 0; m < 3; ++m) {
    const Percentiles p = Of(late[m]);
    std::printf("| %s | %.1f | %.1f | %.1f |\n", Name(modes[m]), p.p50, p.p90, p.p99);
  }
  CHECK(cudaFreeHost(host));
  CHECK(cudaFree(device));
  return 0;
}
