// The executor's memory plan: one arena per run for the host outputs of a
// graph at fixed input shapes, planned once from a first run at those shapes
// (as ggml-alloc places tensors from their last use).
//
//   first run at shapes S      kernels ask OpContext::OutputBuffer; the run
//   (recording)                notes each output's bytes and which outputs
//                              are views of an input (Reshape, Identity, ...)
//            │
//   PlanMemory                 a value and its views share one region, live
//                              from its producer to the last reader of any of
//                              them; an output its kernel row may write over
//                              an input (KernelDef::overwritable_inputs) shares
//                              that input's region when the input dies there
//                              and has its bytes; regions first-fit by
//                              decreasing size
//            │
//   later runs at S            one arena buffer (from the buffer cache) and
//                              each output at its offset
//
// Graph outputs (and everything that views them) keep buffers of their own:
// they outlive the run.
#pragma once

#include <cstdint>
#include <vector>

namespace sparq {

// What the first run at some shapes saw.
struct MemoryRecord {
  std::vector<std::vector<int64_t>> requested;  // [step][output]: bytes asked of OutputBuffer; -1: none
  std::vector<int> root;                        // [slot]: the slot whose buffer it is (itself, or what it views)
  std::vector<int> produced_at;                 // [slot]: the step that produced it; -1: an input
};

struct MemoryPlan {
  std::vector<std::vector<int64_t>> offset;  // [step][output]: byte offset in the arena; -1: its own buffer
  std::vector<std::vector<int64_t>> bytes;   // [step][output]: the planned bytes
  std::vector<char> in_arena;                // [slot]: its buffer is (a view into) the arena
  std::vector<int> in_place_of;              // [step]: the input slot output 0 is written over; -1: none
  std::vector<int64_t> in_place_bytes;       // [step]: then output 0's bytes and the input's, as recorded
  int64_t total = 0;                         // arena bytes
  int64_t values = 0;                        // outputs placed
};

// Places the outputs `record` saw. step_outputs[i]: the slots step i writes
// (-1: unnamed); last_use[s]: the last step reading slot s (-1: none);
// kept[s]: a value that outlives the run (never in the arena); in_place[i]:
// the input slots step i's kernel may write output 0 over (empty: none).
MemoryPlan PlanMemory(const MemoryRecord& record, const std::vector<std::vector<int>>& step_outputs,
                      const std::vector<int>& last_use, const std::vector<bool>& kept,
                      const std::vector<std::vector<int>>& in_place = {});

}  // namespace sparq
