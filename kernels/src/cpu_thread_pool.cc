#include "attn/cpu_thread_pool.h"

#include <sched.h>

#include <algorithm>

namespace attn {

CpuThreadPool::CpuThreadPool(int threads) {
  const int count = threads > 0 ? threads : AvailableCores();
  workers_.reserve(count);
  for (int i = 0; i < count; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

CpuThreadPool::~CpuThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& t : workers_) t.join();
}

int CpuThreadPool::AvailableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

bool CpuThreadPool::Run(int64_t tasks, const std::function<void(int64_t, int)>& task,
                        const std::atomic<bool>* cancel) {
  if (tasks <= 0) return true;
  std::lock_guard<std::mutex> one_run(run_mutex_);
  std::unique_lock<std::mutex> lock(mutex_);
  task_ = &task;
  tasks_ = tasks;
  cancel_ = cancel;
  next_.store(0, std::memory_order_relaxed);
  cancelled_.store(false, std::memory_order_relaxed);
  busy_ = size();
  ++generation_;
  work_ready_.notify_all();
  work_done_.wait(lock, [this] { return busy_ == 0; });
  task_ = nullptr;
  return !cancelled_.load(std::memory_order_relaxed);
}

void CpuThreadPool::WorkerLoop(int worker) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_ready_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_) return;
    seen = generation_;
    const std::function<void(int64_t, int)>& task = *task_;
    const int64_t tasks = tasks_;
    const std::atomic<bool>* cancel = cancel_;
    lock.unlock();
    for (int64_t t = next_.fetch_add(1, std::memory_order_relaxed); t < tasks;
         t = next_.fetch_add(1, std::memory_order_relaxed)) {
      if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
        cancelled_.store(true, std::memory_order_relaxed);
        break;
      }
      task(t, worker);
    }
    lock.lock();
    if (--busy_ == 0) work_done_.notify_one();
  }
}

CpuThreadPool& DefaultCpuThreadPool() {
  static CpuThreadPool* pool = new CpuThreadPool(0);
  return *pool;
}

}  // namespace attn
