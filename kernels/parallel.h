// A small fixed-size thread pool with a blocking ParallelFor.
//
// Determinism: ParallelFor only splits independent iterations; callers must
// not let the result depend on how [0, n) is split (no cross-chunk float
// reductions). sparq's kernels compute each output element in one chunk, so
// results are identical for every thread count.
#pragma once

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
  int64_t chunks_done_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

// ParallelFor on `pool`, or inline when pool is null.
void ParallelFor(ThreadPool* pool, int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace sparq
