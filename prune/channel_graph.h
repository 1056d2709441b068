// The channel graph of a model: which output channels of which producers
// flow where, and which must be removed together. Internal to sparq; shared
// by the channel analysis (channel_graph.cc) and the rewrite (channel.cc).
//
// Every output channel of a producer (Conv with group 1, Gemm, MatMul on a
// 2-D input) gets an id. Ids flow along the channel axis of values through
// channel-wise ops; an op that combines two tracked values position by
// position (a residual Add) ties their ids (union-find), so tied channels
// form one class that is removed from every producer at once:
//
//   conv_a ─ bn ─ relu ──────────────┐
//                                    Add ─ relu ─> conv_c (consumer: drops input channels)
//   conv_b ─ bn ─────────────────────┘
//   class k = {conv_a channel k, conv_b channel k}
//
// Reaching anything that cannot drop channels (a graph output, Softmax, a
// Reshape of a spatial map, ...) locks the classes involved.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "prune/internal.h"

namespace sparq {
namespace prune_internal {


// Channel ids of a value along its channel axis (1 for NC..., the last axis
// of a rank-2 value); -1 marks a channel no producer owns.
struct Tracked {
  std::vector<int64_t> ids;
  int rank = 2;
  bool spatial_one = false;  // every dim after the channel axis is 1
};

enum class Role { kNone, kUnary, kBatchNorm, kPool, kDepthwise, kElementwise, kConcat, kFlatten, kConsumer };

struct NodeInfo {
  bool producer = false;
  int64_t base = 0, channels = 0;  // ids [base, base + channels)
  Role role = Role::kNone;
  std::vector<int64_t> segments;   // kConcat along channels: channels per input
};

class ChannelAnalysis {
 public:
  ChannelAnalysis(const Model& model, const Graph& g) : g_(g), model_(model) {}

  Status Run();

  int64_t Find(int64_t id) {
    while (parent_[id] != id) id = parent_[id] = parent_[parent_[id]];
    return id;
  }
  // Lock reason of a class root ("" when free), after Run().
  std::string RootLock(int64_t root) const {
    auto it = root_lock_.find(root);
    return it == root_lock_.end() ? "" : it->second;
  }

  const Graph& g_;
  std::vector<NodeInfo> info;
  std::map<std::string, Tracked> values;
  std::vector<std::pair<int, int64_t>> owner;  // id -> (node index, channel)
  std::map<std::string, const WeightedLayer*> layer_of;  // by node name
  std::vector<WeightedLayer> layers;

 private:
  const Model& model_;
  std::vector<int64_t> parent_;
  std::vector<std::string> lock_;
  std::map<int64_t, std::string> root_lock_;

  void Union(int64_t a, int64_t b) {
    a = Find(a);
    b = Find(b);
    if (a != b) parent_[std::max(a, b)] = std::min(a, b);
  }
  void Lock(const Tracked& t, const std::string& why) {
    for (int64_t id : t.ids)
      if (id >= 0 && lock_[id].empty()) lock_[id] = why;
  }
  void Tie(const Tracked& a, const Tracked& b) {
    for (size_t i = 0; i < a.ids.size(); ++i)
      if (a.ids[i] >= 0 && b.ids[i] >= 0) Union(a.ids[i], b.ids[i]);
  }
  // Whether a constant input broadcasts per channel against `t` (all dims 1
  // except the channel dim, which is 1 or C).
  bool PerChannelConstant(const Tensor& c, const Tracked& t) const {
    const int axis_from_end = t.rank - 2;  // dims after the channel axis (rank 2: channel is last)
    const int rank_c = static_cast<int>(c.rank());
    for (int d = 0; d < rank_c; ++d) {
      const int from_end = rank_c - 1 - d;
      const int64_t size = c.dim(d);
      if (from_end == (t.rank == 2 ? 0 : axis_from_end)) {
        if (size != 1 && size != static_cast<int64_t>(t.ids.size())) return false;
      } else if (size != 1) {
        return false;
      }
    }
    return true;
  }
  int64_t KnownChannels(const std::string& value, int axis) const {
    const ValueInfo* vi = g_.FindValueInfo(value);
    if (vi == nullptr || !vi->has_shape || axis >= static_cast<int>(vi->dims.size())) return -1;
    return vi->dims[axis].known() ? vi->dims[axis].value : -1;
  }
  bool IsProducer(const Node& n, const WeightedLayer& L, int* rank) const;
  void Visit(size_t i);
};

// A node's name, or its first output's name when it has none.
std::string NodeName(const Node& n);
// Producer-level groups: producers connected by a shared class.
std::vector<ChannelGroup> Groups(ChannelAnalysis& a);

}  // namespace prune_internal
}  // namespace sparq
