// A small fixed-size thread pool with a blocking ParallelFor.
//
// Waiting threads spin for a short while (kSpin) before they sleep, as
// onnxruntime's intra-op pool does: a model runs one ParallelFor per node,
// a few microseconds of work each at batch 1, and waking a sleeping thread
// through the kernel costs about as much (on this VM the second thread made
// batch-1 INT8 models no faster at all).
//
// Determinism: ParallelFor only splits independent iterations; callers must
// not let the result depend on how [0, n) is split (no cross-chunk float
// reductions). sparq's kernels compute each output element in one chunk, so
// results are identical for every thread count.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sparq {

class ThreadPool {
 public:
  // `threads` <= 0 means one per hardware thread. One thread runs inline.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Runs fn(begin, end) over chunks covering [0, n), each chunk at least
  // `grain` iterations (except the last), and returns when all are done.
  // Nested calls from inside fn run inline.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void WorkerLoop();
  // Spins until pred() or kSpin has passed; true when pred() held.
  template <typename Pred>
  static bool SpinUntil(Pred pred);
  static constexpr std::chrono::microseconds kSpin{100};

  int num_threads_ = 1;
  std::vector<std::thread> workers_;
  std::mutex call_mu_;  // one ParallelFor at a time from outside threads
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_chunk_ = 0;
  int64_t next_chunk_ = 0;
  int64_t num_chunks_ = 0;
  std::atomic<int64_t> chunks_done_{0};  // written under mu_, read while spinning
  std::atomic<uint64_t> generation_{0};  // likewise
  std::atomic<bool> stop_{false};
};

// ParallelFor on `pool`, or inline when pool is null.
void ParallelFor(ThreadPool* pool, int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace sparq
