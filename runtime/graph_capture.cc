#include "runtime/graph_capture.h"

namespace sparq {

namespace {

std::string NameOf(const CaptureLayout& layout, int slot) {
  if (slot >= 0 && static_cast<size_t>(slot) < layout.slot_name.size() && !layout.slot_name[slot].empty()) {
    return "'" + layout.slot_name[slot] + "'";
  }
  return "slot " + std::to_string(slot);
}

bool Flag(const std::vector<bool>& v, int slot) { return slot >= 0 && static_cast<size_t>(slot) < v.size() && v[slot]; }

}  // namespace

Status CheckCapturable(const CaptureLayout& layout) {
  if (!layout.context_supports_capture) return Status::NotSupported("the backend does not capture graphs");
  std::vector<bool> read_by_step;
  auto mark = [&](int s) {
    if (s < 0) return;
    if (static_cast<size_t>(s) >= read_by_step.size()) read_by_step.resize(static_cast<size_t>(s) + 1, false);
    read_by_step[static_cast<size_t>(s)] = true;
  };
  for (const CaptureStep& step : layout.steps)
    for (int s : step.inputs) mark(s);
  bool any_node = false;
  for (const CaptureStep& step : layout.steps) {
    switch (step.kind) {
      case CaptureStep::Kind::kNode:
        any_node = true;
        if (step.place != 0) return Status::NotSupported(step.label + " runs on the CPU (no row of the backend takes it)");
        for (int s : step.inputs) {
          if (s < 0 || Flag(layout.on_device, s) || Flag(layout.constant, s)) continue;
          return Status::NotSupported(step.label + " reads " + NameOf(layout, s) +
                                      " on the host, and a run may change it (a graph input, or a value copied "
                                      "down from the device)");
        }
        break;
      case CaptureStep::Kind::kUpload:
        if (step.place != 0 || step.inputs.empty() || !Flag(layout.graph_input, step.inputs[0])) {
          return Status::NotSupported("copy " + step.label + " uploads a value computed on the host inside the run");
        }
        break;
      case CaptureStep::Kind::kDownload:
        if (step.place != 0) return Status::NotSupported("copy " + step.label + " is not from the backend's device");
        for (int s : step.outputs)
          if (Flag(read_by_step, s)) {
            return Status::NotSupported("copy " + step.label + " brings a value to the host for a later node");
          }
        break;
    }
  }
  if (!any_node) return Status::NotSupported("no node runs on the device");
  return Status::OK();
}

}  // namespace sparq
