// Whether an executor's steps can run as one captured device graph (CUDA
// graphs, kernels/backend.h's BackendContext::BeginCapture): plain C++, so
// the rule is tested on the CPU (tests/runtime/graph_capture_test.cc).
//
//   upload steps      node steps, all on one context    download steps
//   (graph inputs)    that supports capture              (graph outputs)
//   host -> device  ->  [ captured once per input shapes, replayed ]  -> host
//
// The uploads run before a replay into device buffers fixed per input
// shapes, the downloads after it from fixed buffers; everything between is
// the graph.
#pragma once

#include <string>
#include <vector>

#include "sparq/status.h"

namespace sparq {

// One step of an executor as the capture rule sees it.
struct CaptureStep {
  enum class Kind { kNode, kUpload, kDownload };
  Kind kind = Kind::kNode;
  int place = 0;             // the backend context it runs on (0: the chosen backend's)
  std::string label;         // node description or copy label, for reasons
  std::vector<int> inputs;   // value slots read (-1 = absent)
  std::vector<int> outputs;  // value slots written (-1 = unnamed)
};

// What the rule needs to know about the executor.
struct CaptureLayout {
  std::vector<CaptureStep> steps;
  bool context_supports_capture = false;  // BackendContext::SupportsGraphCapture of place 0
  std::vector<bool> graph_input;  // per slot: a graph input (a run may change it)
  std::vector<bool> constant;     // per slot: a value no run changes (weights; on any device)
  std::vector<bool> on_device;    // per slot: lives on place 0's device
  std::vector<std::string> slot_name;  // per slot, for reasons (may be empty)
};

// OK when `layout` can be captured: the context supports capture; every node
// step runs on place 0 (no node left to the CPU); every upload reads a graph
// input and is read only by node steps; every download is read by no step
// (a graph output); every value a node step reads is on the device or a
// constant (a graph input read on the host would be baked into the graph);
// at least one node step. Otherwise NotSupported with the first reason.
Status CheckCapturable(const CaptureLayout& layout);

}  // namespace sparq
