#include "kernels/parallel.h"

#include <algorithm>

namespace sparq {
namespace {
thread_local bool t_inside_pool = false;
}  // namespace

// No PAUSE in the loop: on this project's 2-vCPU VMs a spin of PAUSEs at
// times made 2 threads slower than 1 (YOLOv8n INT8 11.6 ms against 8.2; a
// plain loop of loads 5.7 in the same minutes, sleeping at once 7.5; on a
// quieter host both spins 5.8-6.0), likely the hypervisor descheduling a
// pausing vCPU. The spin is bounded by kSpin either way.
template <typename Pred>
bool ThreadPool::SpinUntil(Pred pred) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (pred()) return true;
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) return false;
  }
}

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  num_threads_ = threads;
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::WorkerLoop() {
  t_inside_pool = true;
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    lock.unlock();
    SpinUntil([&] { return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen; });
    lock.lock();
    work_cv_.wait(lock, [&] { return stop_ || (generation_ != seen && next_chunk_ < num_chunks_); });
    if (stop_) return;
    while (next_chunk_ < num_chunks_) {
      int64_t c = next_chunk_++;
      const auto* job = job_;
      int64_t begin = c * job_chunk_, end = std::min(job_n_, begin + job_chunk_);
      lock.unlock();
      (*job)(begin, end);
      lock.lock();
      if (++chunks_done_ == num_chunks_) done_cv_.notify_all();
    }
    seen = generation_;
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (num_threads_ <= 1 || t_inside_pool || n <= grain) {
    fn(0, n);
    return;
  }
  // About four chunks per thread balances uneven work without much overhead.
  int64_t chunk = std::max(grain, (n + 4 * num_threads_ - 1) / (4 * num_threads_));
  std::lock_guard<std::mutex> call_lock(call_mu_);
  std::unique_lock<std::mutex> lock(mu_);
  job_ = &fn;
  job_n_ = n;
  job_chunk_ = chunk;
  num_chunks_ = (n + chunk - 1) / chunk;
  next_chunk_ = 0;
  chunks_done_ = 0;
  ++generation_;
  work_cv_.notify_all();
  // The calling thread works too.
  t_inside_pool = true;
  while (next_chunk_ < num_chunks_) {
    int64_t c = next_chunk_++;
    int64_t begin = c * chunk, end = std::min(n, begin + chunk);
    lock.unlock();
    fn(begin, end);
    lock.lock();
    ++chunks_done_;
  }
  t_inside_pool = false;
  if (chunks_done_ != num_chunks_) {  // a worker is finishing its chunk: spin briefly before sleeping
    const int64_t all = num_chunks_;
    lock.unlock();
    SpinUntil([&] { return chunks_done_.load(std::memory_order_acquire) == all; });
    lock.lock();
  }
  done_cv_.wait(lock, [&] { return chunks_done_ == num_chunks_; });
  job_ = nullptr;
  num_chunks_ = 0;
}

void ParallelFor(ThreadPool* pool, int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (pool == nullptr) {
    if (n > 0) fn(0, n);
    return;
  }
  pool->ParallelFor(n, grain, fn);
}

}  // namespace sparq
