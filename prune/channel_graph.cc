// Channel analysis: traces producers' output channels through the graph
// (see channel_graph.h), groups tied channels, and turns per-layer targets
// into channel masks.
#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "prune/channel_graph.h"

namespace sparq {

using namespace prune_internal;  // NOLINT

namespace {

const std::set<std::string> kUnaryOps = {"Relu",  "LeakyRelu", "PRelu", "Sigmoid",  "Tanh",     "HardSigmoid", "HardSwish",
                                         "Elu",   "Selu",      "Softplus", "Clip", "Identity", "Dropout",     "Mish"};
const std::set<std::string> kPoolOps = {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LpPool", "GlobalLpPool"};
const std::set<std::string> kElementwiseOps = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", "Mean"};

}  // namespace

namespace prune_internal {

bool ChannelAnalysis::IsProducer(const Node& n, const WeightedLayer& L, int* rank) const {
  if (!L.unsupported.empty() || L.rows < 2) return false;
  if (L.op_type == "Conv") {
    *rank = static_cast<int>(L.weight_shape.size());
    return L.groups == 1;
  }
  if (L.op_type == "Gemm") {
    *rank = 2;
    return true;
  }
  // MatMul: only on rank-2 inputs, so its channel axis is the last.
  auto it = values.find(n.inputs[0]);
  int r = it != values.end() ? it->second.rank : -1;
  if (r < 0) {
    const ValueInfo* vi = g_.FindValueInfo(n.inputs[0]);
    if (vi != nullptr && vi->has_shape) r = static_cast<int>(vi->dims.size());
  }
  *rank = 2;
  return r == 2;
}

void ChannelAnalysis::Visit(size_t i) {
  const Node& n = g_.nodes[i];
  NodeInfo& ni = info[i];
  std::vector<int> tracked;
  for (size_t k = 0; k < n.inputs.size(); ++k)
    if (values.count(n.inputs[k])) tracked.push_back(static_cast<int>(k));
  const std::string at = "reaches " + n.Describe();
  auto lock_all = [&](const std::string& why) {
    for (int k : tracked) Lock(values[n.inputs[k]], why);
  };

  // The input side.
  if (!tracked.empty()) {
    const Tracked& t0 = values[n.inputs[tracked[0]]];
    const std::string& op = n.op_type;
    auto lw = layer_of.find(n.name.empty() ? (n.outputs.empty() ? "" : n.outputs[0]) : n.name);
    const WeightedLayer* L = lw == layer_of.end() ? nullptr : lw->second;
    if (!n.domain.empty() && n.domain != "ai.onnx") {
      lock_all(at + ", an operator of domain " + n.domain);
    } else if (L != nullptr && tracked.size() == 1 && tracked[0] == 0 && L->unsupported.empty() &&
               ((op == "Conv" && L->groups == 1 && t0.rank >= 3) ||
                (op != "Conv" && t0.rank == 2))) {
      ni.role = Role::kConsumer;
    } else if (op == "Conv" && L != nullptr && L->unsupported.empty() && tracked.size() == 1 && tracked[0] == 0 &&
               L->groups == static_cast<int64_t>(t0.ids.size()) && L->rows == L->groups && L->weight_shape[1] == 1) {
      ni.role = Role::kDepthwise;
      values[n.outputs[0]] = t0;
      values[n.outputs[0]].spatial_one = false;
    } else if (kUnaryOps.count(op) && tracked.size() == 1 && tracked[0] == 0) {
      bool ok = n.outputs.size() < 2 || n.outputs[1].empty() || CountReaders(g_, n.outputs[1]) == 0;
      if (op == "PRelu") {
        const Tensor* s = n.inputs.size() > 1 ? g_.FindWeight(n.inputs[1]) : nullptr;
        ok = ok && s != nullptr && s->dtype() == DataType::kFloat32 && PerChannelConstant(*s, t0);
      }
      if (op == "Clip") {
        for (size_t k = 1; k < n.inputs.size(); ++k) ok = ok && (n.inputs[k].empty() || g_.FindWeight(n.inputs[k]));
      }
      if (ok) {
        ni.role = Role::kUnary;
        values[n.outputs[0]] = t0;
      } else {
        lock_all(at + " with parameters that are not per-channel constants");
      }
    } else if (op == "BatchNormalization" && tracked.size() == 1 && tracked[0] == 0 && t0.rank >= 2) {
      bool ok = n.inputs.size() >= 5 && (n.outputs.size() < 2 || CountReaders(g_, n.outputs[1]) == 0);
      for (size_t k = 1; ok && k < 5; ++k) {
        const Tensor* p = g_.FindWeight(n.inputs[k]);
        ok = p != nullptr && p->dtype() == DataType::kFloat32 && p->numel() == static_cast<int64_t>(t0.ids.size());
      }
      if (ok) {
        ni.role = Role::kBatchNorm;
        values[n.outputs[0]] = t0;
      } else {
        lock_all(at + " whose parameters are not constant per-channel float32");
      }
    } else if (kPoolOps.count(op) && tracked.size() == 1 && t0.rank >= 3) {
      if (n.outputs.size() > 1 && !n.outputs[1].empty() && CountReaders(g_, n.outputs[1]) > 0) {
        lock_all(at + " whose indices output is used");
      } else {
        ni.role = Role::kPool;
        Tracked out = t0;
        out.spatial_one = t0.spatial_one || op.rfind("Global", 0) == 0;
        values[n.outputs[0]] = out;
      }
    } else if (kElementwiseOps.count(op)) {
      bool ok = true;
      for (size_t k = 0; k < n.inputs.size() && ok; ++k) {
        if (values.count(n.inputs[k])) {
          const Tracked& t = values[n.inputs[k]];
          ok = t.ids.size() == t0.ids.size() && (t.rank == t0.rank || t.spatial_one || t0.spatial_one);
        } else if (const Tensor* c = g_.FindWeight(n.inputs[k])) {
          ok = c->dtype() == DataType::kFloat32 && PerChannelConstant(*c, t0);
        } else {
          ok = false;  // an untracked dynamic operand
        }
      }
      if (ok) {
        ni.role = Role::kElementwise;
        Tracked out = t0;
        for (int k : tracked) {
          const Tracked& t = values[n.inputs[k]];
          Tie(t0, t);
          out.rank = std::max(out.rank, t.rank);
          out.spatial_one = out.spatial_one && t.spatial_one;
        }
        values[n.outputs[0]] = out;
      } else {
        lock_all(at + " combined with a tensor whose channels are not tracked or not per-channel");
      }
    } else if (op == "Concat") {
      const int64_t axis = n.attr_int("axis", 0);
      const int64_t norm_axis = axis < 0 ? axis + t0.rank : axis;
      const int64_t channel_axis = 1;  // rank 2 values: [N, C]
      Tracked out = t0;
      out.ids.clear();
      bool ok = true;
      for (size_t k = 0; k < n.inputs.size() && ok; ++k) {
        auto it = values.find(n.inputs[k]);
        if (norm_axis == channel_axis) {
          if (it != values.end()) {
            out.ids.insert(out.ids.end(), it->second.ids.begin(), it->second.ids.end());
            out.spatial_one = out.spatial_one && it->second.spatial_one;
            ni.segments.push_back(static_cast<int64_t>(it->second.ids.size()));
          } else {
            const int64_t c = KnownChannels(n.inputs[k], static_cast<int>(channel_axis));
            ok = c >= 0;
            out.ids.insert(out.ids.end(), static_cast<size_t>(std::max<int64_t>(c, 0)), -1);
            ni.segments.push_back(c);
          }
        } else {  // concatenation along another axis ties the channels
          ok = it != values.end() && it->second.ids.size() == t0.ids.size();
          if (ok) Tie(t0, it->second);
        }
      }
      if (ok) {
        ni.role = Role::kConcat;
        if (norm_axis != channel_axis) {
          out.ids = t0.ids;
          ni.segments.clear();
        }
        values[n.outputs[0]] = out;
      } else {
        lock_all(at + " with an input whose channel count is unknown or untracked");
      }
    } else if ((op == "Flatten" && n.attr_int("axis", 1) == 1 && tracked[0] == 0) ||
               (op == "Reshape" && tracked[0] == 0 && n.inputs.size() > 1)) {
      bool ok = t0.rank >= 2;
      if (op == "Reshape") {
        const Tensor* s = g_.FindWeight(n.inputs[1]);
        std::vector<int64_t> shape = s != nullptr ? s->ToInt64Vector() : std::vector<int64_t>{};
        ok = ok && shape.size() == 2 && shape[1] == -1 && (shape[0] == 0 || shape[0] == -1);
      }
      int64_t spatial = 1;
      if (ok && t0.rank > 2 && !t0.spatial_one) {
        const ValueInfo* vi = g_.FindValueInfo(n.inputs[0]);
        ok = vi != nullptr && vi->has_shape && static_cast<int>(vi->dims.size()) == t0.rank;
        for (int d = 2; ok && d < t0.rank; ++d) {
          ok = vi->dims[d].known();
          if (ok) spatial *= vi->dims[d].value;
        }
      }
      if (ok) {
        ni.role = Role::kFlatten;
        Tracked out;
        out.rank = 2;
        for (int64_t id : t0.ids) out.ids.insert(out.ids.end(), static_cast<size_t>(spatial), id);
        values[n.outputs[0]] = out;
      } else {
        lock_all(at + ", a reshape whose channel layout is not handled (only Flatten/Reshape to [N, -1] with known spatial dims)");
      }
    } else {
      lock_all(at + " (" + op + "), which cannot drop channels");
    }
  }

  // The output side: producers start fresh ids.
  auto lw = layer_of.find(n.name.empty() ? (n.outputs.empty() ? "" : n.outputs[0]) : n.name);
  int rank = 2;
  if (lw != layer_of.end() && IsProducer(n, *lw->second, &rank)) {
    ni.producer = true;
    ni.base = static_cast<int64_t>(parent_.size());
    ni.channels = lw->second->rows;
    Tracked out;
    out.rank = rank;
    for (int64_t c = 0; c < ni.channels; ++c) {
      out.ids.push_back(ni.base + c);
      parent_.push_back(ni.base + c);
      lock_.emplace_back();
      owner.emplace_back(static_cast<int>(i), c);
    }
    values[n.outputs[0]] = out;
  }
}

Status ChannelAnalysis::Run() {
  SPARQ_ASSIGN_OR_RETURN(layers, FindWeightedLayers(model_));
  for (const auto& L : layers) layer_of[L.node] = &L;
  info.assign(g_.nodes.size(), NodeInfo());
  for (size_t i = 0; i < g_.nodes.size(); ++i) Visit(i);
  for (const auto& o : g_.outputs) {
    auto it = values.find(o.name);
    if (it != values.end()) Lock(it->second, "reaches graph output '" + o.name + "'");
  }
  for (size_t id = 0; id < parent_.size(); ++id) {
    const int64_t root = Find(static_cast<int64_t>(id));
    if (!lock_[id].empty() && !root_lock_.count(root)) root_lock_[root] = lock_[id];
  }
  return Status::OK();
}

std::string NodeName(const Node& n) { return n.name.empty() ? n.outputs[0] : n.name; }

// Producer-level groups: producers connected by a shared class.
std::vector<ChannelGroup> Groups(ChannelAnalysis& a) {
  std::map<int64_t, std::set<int>> producers_of_root;
  for (size_t id = 0; id < a.owner.size(); ++id) producers_of_root[a.Find(static_cast<int64_t>(id))].insert(a.owner[id].first);
  // Union producers through roots.
  std::map<int, int> parent;
  std::function<int(int)> find = [&](int x) { return parent[x] == x ? x : parent[x] = find(parent[x]); };
  for (size_t i = 0; i < a.info.size(); ++i)
    if (a.info[i].producer) parent[static_cast<int>(i)] = static_cast<int>(i);
  for (const auto& kv : producers_of_root) {
    const int first = *kv.second.begin();
    for (int p : kv.second) parent[find(p)] = find(first);
  }
  std::map<int, ChannelGroup> groups;
  for (const auto& kv : parent) groups[find(kv.first)].producers.push_back(NodeName(a.g_.nodes[kv.first]));
  for (const auto& kv : producers_of_root) {
    ChannelGroup& grp = groups[find(*kv.second.begin())];
    const std::string lock = a.RootLock(kv.first);
    if (lock.empty()) ++grp.classes;
    else if (grp.locked_reason.empty()) grp.locked_reason = lock;
  }
  std::vector<ChannelGroup> out;
  for (auto& kv : groups) {
    if (kv.second.classes > 0) kv.second.locked_reason.clear();
    out.push_back(std::move(kv.second));
  }
  return out;
}

}  // namespace prune_internal

StatusOr<std::vector<ChannelGroup>> AnalyzeChannels(const Model& model) {
  Model sorted = model;
  SPARQ_RETURN_IF_ERROR(sorted.graph.TopoSort());
  ChannelAnalysis a(sorted, sorted.graph);
  SPARQ_RETURN_IF_ERROR(a.Run());
  return Groups(a);
}

namespace prune_internal {

Status ChannelPlanReasons(const Model& model, const std::vector<LayerPlan>& plans,
                                         std::map<std::string, std::string>* dense) {
  SPARQ_ASSIGN_OR_RETURN(std::vector<ChannelGroup> groups, AnalyzeChannels(model));
  std::map<std::string, const ChannelGroup*> group_of;
  for (const auto& g : groups)
    for (const auto& p : g.producers) group_of[p] = &g;
  std::map<std::string, bool> pruned;
  for (const auto& p : plans) pruned[p.layer.node] = p.prune && p.structure.kind == PruneStructure::Kind::kChannel;
  for (const auto& p : plans) {
    if (!pruned[p.layer.node]) continue;
    auto it = group_of.find(p.layer.node);
    if (it == group_of.end()) {
      (*dense)[p.layer.node] = "its output channels cannot be traced (channel pruning handles Conv with group 1, "
                               "Gemm, and MatMul on a 2-D input)";
      continue;
    }
    const ChannelGroup& g = *it->second;
    if (g.classes == 0) {
      (*dense)[p.layer.node] = "its channels cannot be removed: " + g.locked_reason;
      continue;
    }
    for (const auto& other : g.producers) {
      if (!pruned[other]) {
        (*dense)[p.layer.node] = "its channels are tied to those of '" + other + "' (e.g. by a residual Add), which stays dense";
        break;
      }
    }
  }
  return Status::OK();
}

StatusOr<std::map<std::string, PruneMask>> ComputeChannelMasks(
    const Model& model, const std::map<std::string, double>& targets, const std::map<std::string, Matrix>& scores,
    PruneScore pooling, std::vector<std::pair<std::string, std::string>>* skipped) {
  Model sorted = model;
  SPARQ_RETURN_IF_ERROR(sorted.graph.TopoSort());
  ChannelAnalysis a(sorted, sorted.graph);
  SPARQ_RETURN_IF_ERROR(a.Run());
  std::map<std::string, PruneMask> masks;
  std::map<std::string, double> mean_row;  // per producer, to normalize scores
  for (const auto& [name, target] : targets) {
    auto s = scores.find(name);
    if (s == scores.end()) return Status::Internal("no scores for layer '" + name + "'");
    masks[name] = PruneMask{s->second.rows, s->second.cols, std::vector<uint8_t>(s->second.values.size(), 1)};
    double sum = 0.0;
    for (int64_t r = 0; r < s->second.rows; ++r) sum += PooledRowScore(s->second, r, pooling);
    mean_row[name] = s->second.rows > 0 ? sum / static_cast<double>(s->second.rows) : 0.0;
  }
  // Classes by root, their members, and whether they may go.
  struct Class {
    std::vector<std::pair<std::string, int64_t>> members;
    std::string blocked;
    double score = 0.0;
  };
  std::map<int64_t, Class> classes;
  for (size_t id = 0; id < a.owner.size(); ++id) {
    const std::string name = NodeName(a.g_.nodes[a.owner[id].first]);
    Class& c = classes[a.Find(static_cast<int64_t>(id))];
    c.members.emplace_back(name, a.owner[id].second);
  }
  std::map<std::string, std::string> reasons;
  for (auto& [root, c] : classes) {
    c.blocked = a.RootLock(root);
    for (const auto& [name, ch] : c.members) {
      auto t = targets.find(name);
      if (t == targets.end()) {
        if (c.blocked.empty()) c.blocked = "its channels are tied to those of '" + name + "', which is not pruned";
        continue;
      }
      const double mean = mean_row[name];
      c.score += mean > 0 ? PooledRowScore(scores.at(name), ch, pooling) / mean : 0.0;
    }
    if (!c.blocked.empty())
      for (const auto& m : c.members)
        if (targets.count(m.first) && !reasons.count(m.first)) reasons[m.first] = c.blocked;
  }
  // Per producer-group: prune the lowest free classes, at the smallest target of its producers.
  for (const ChannelGroup& grp : Groups(a)) {
    double target = 1.0;
    for (const auto& p : grp.producers) target = std::min(target, targets.count(p) ? targets.at(p) : 0.0);
    std::vector<std::pair<double, int64_t>> free;
    for (const auto& [root, c] : classes) {
      if (!c.blocked.empty()) continue;
      if (std::find(grp.producers.begin(), grp.producers.end(), c.members[0].first) == grp.producers.end()) continue;
      free.emplace_back(c.score, root);
    }
    std::stable_sort(free.begin(), free.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    const int64_t k = std::min<int64_t>(static_cast<int64_t>(free.size()),
                                        std::llround(target * static_cast<double>(free.size())));
    for (int64_t i = 0; i < k; ++i) {
      for (const auto& [name, ch] : classes[free[i].second].members) {
        PruneMask& m = masks[name];
        std::fill_n(m.keep.begin() + ch * m.cols, m.cols, uint8_t{0});
      }
    }
  }
  if (skipped != nullptr)
    for (const auto& [name, mask] : masks)
      if (mask.pruned() == 0 && reasons.count(name)) skipped->emplace_back(name, reasons[name]);
  return masks;
}

}  // namespace prune_internal

}  // namespace sparq
