// attn/cpu_thread_pool.h
//
// CpuThreadPool: the fixed set of threads the CPU kernels run their tasks
// on, made once (the CPU backend makes one per executor, sized by
// --cpu_threads; DefaultCpuThreadPool() serves Forward and the C ABI), so no
// request creates a thread.
#ifndef ATTN_CPU_THREAD_POOL_H_
#define ATTN_CPU_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace attn {

class CpuThreadPool {
 public:
  // `threads` workers; 0 = the cores this process may run on (its CPU
  // affinity mask, which container CPU sets and taskset narrow).
  explicit CpuThreadPool(int threads = 0);
  ~CpuThreadPool();
  CpuThreadPool(const CpuThreadPool&) = delete;
  CpuThreadPool& operator=(const CpuThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()); }

  // Runs task(t, worker) for every t in [0, tasks) on the pool's workers
  // (worker in [0, size()): an index for per-worker scratch) and returns
  // when all have finished. One Run at a time: a second caller waits for the
  // first. `cancel` (optional) is read before each task; once it is true
  // the remaining tasks are skipped and Run returns false.
  bool Run(int64_t tasks, const std::function<void(int64_t task, int worker)>& task,
           const std::atomic<bool>* cancel = nullptr);

  // The cores this process may run on (at least 1).
  static int AvailableCores();

 private:
  void WorkerLoop(int worker);

  std::mutex run_mutex_;  // one Run at a time

  std::mutex mutex_;
  std::condition_variable work_ready_, work_done_;
  uint64_t generation_ = 0;  // bumped per Run; workers wait for a new one
  bool stopping_ = false;
  int busy_ = 0;  // workers still in the current Run
  const std::function<void(int64_t, int)>* task_ = nullptr;
  int64_t tasks_ = 0;
  const std::atomic<bool>* cancel_ = nullptr;
  std::atomic<int64_t> next_{0};
  std::atomic<bool> cancelled_{false};

  std::vector<std::thread> workers_;
};

// A process-wide pool of AvailableCores() threads, made on first use.
CpuThreadPool& DefaultCpuThreadPool();

}  // namespace attn

#endif  // ATTN_CPU_THREAD_POOL_H_
