// server/backends/backend.h
//
// CreateBackend: turns --backend/--devices/--streams_per_device/--cpu_*
// into the executors and the kernel catalog the server runs with.
//
//   auto  CUDA when this build has it and a usable GPU (compute capability
//         >= 8.0) is visible, else CPU;
//   cuda  CUDA or an error (FAILED_PRECONDITION) saying why not;
//   cpu   the CPU reference, cpu_workers executors of cpu_threads threads;
//   transport_only  measurement mode: requests are checked as the real
//         backend of this build would (the CUDA catalog when built with
//         CUDA), nothing is computed, outputs are NaN.
#ifndef ATTN_SERVER_BACKEND_H_
#define ATTN_SERVER_BACKEND_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "attn/device.h"
#include "core/executor.h"
#include "backends/kernel_catalog.h"
#include "regions/region_backend.h"
#include "core/server_options.h"
#include "sessions/session_memory.h"

namespace attn::server {

struct BackendSetup {
  // Shared with the CUDA executors, which launch its per-device handles.
  std::shared_ptr<const KernelCatalog> catalog;
  std::vector<DeviceInfo> devices;  // CUDA devices served; empty on the CPU backend
  std::vector<std::unique_ptr<Executor>> executors;
  std::string choice_reason;  // why this backend, for the start-up log
  // What ServerInfo and responses call the backend; empty: the catalog's.
  std::string backend_name;
  // How region memory is mapped for these executors; null: host only.
  std::unique_ptr<RegionBackend> region_backend;
  // The KV-cache page pool's memory (the host's on the CPU backend, the
  // device's on the CUDA backend), or null and why sessions are off.
  std::unique_ptr<SessionMemory> session_memory;
  std::string sessions_off_reason;
};

absl::StatusOr<BackendSetup> CreateBackend(const ServerOptions& options);

}  // namespace attn::server

#endif  // ATTN_SERVER_BACKEND_H_
