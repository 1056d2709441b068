// The GEMM views of weighted layers (sparq/weighted_layer.h), option checks,
// and the per-layer plan (structure, target, or why a layer stays dense).
#include <algorithm>
#include <cmath>
#include <set>

#include "formats/text_table.h"
#include "prune/internal.h"

namespace sparq {

namespace prune_internal {

std::string JoinNames(const std::vector<std::string>& names, size_t limit) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < limit; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > limit) out += ", ... (" + std::to_string(names.size()) + " in all)";
  return out.empty() ? "none" : out;
}

Tensor* MutableWeight(Graph& g, const std::string& name) {
  auto it = g.initializers.find(name);
  if (it != g.initializers.end()) return &it->second;
  for (Node& n : g.nodes) {
    if (n.op_type != "Constant" || !n.domain.empty() || n.outputs.empty() || n.outputs[0] != name) continue;
    Attribute* a = n.mutable_attr("value");
    return a != nullptr && a->kind == Attribute::Kind::kTensor ? &a->t : nullptr;
  }
  return nullptr;
}

int FindNodeIndex(const Graph& g, const std::string& name) {
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.name == name || (n.name.empty() && !n.outputs.empty() && n.outputs[0] == name)) return static_cast<int>(i);
  }
  return -1;
}

int64_t CountFloatParams(const Graph& g) {
  int64_t total = 0;
  for (const auto& kv : g.initializers)
    if (kv.second.dtype() == DataType::kFloat32) total += kv.second.numel();
  for (const Node& n : g.nodes) {
    if (n.op_type != "Constant") continue;
    const Attribute* a = n.attr("value");
    if (a != nullptr && a->kind == Attribute::Kind::kTensor && a->t.dtype() == DataType::kFloat32) total += a->t.numel();
  }
  return total;
}

}  // namespace prune_internal

using namespace prune_internal;  // NOLINT: this file implements them

StatusOr<Matrix> ReadWeightMatrix(const Model& model, const WeightedLayer& layer) {
  const Tensor* w = model.graph.FindWeight(layer.weight);
  if (w == nullptr) return Status::NotFound("layer '" + layer.node + "': weight '" + layer.weight + "' not found");
  if (w->dtype() != DataType::kFloat32 || w->numel() != layer.rows * layer.cols) {
    return Status::InvalidArgument("layer '" + layer.node + "': weight '" + layer.weight + "' is " +
                                   DataTypeName(w->dtype()) + ShapeToString(w->shape()) + ", expected float32 with " +
                                   std::to_string(layer.rows) + "x" + std::to_string(layer.cols) + " values");
  }
  Matrix m(layer.rows, layer.cols);
  const float* p = w->data<float>();
  if (!layer.transposed_view) {
    std::copy(p, p + w->numel(), m.values.begin());
  } else {  // stored [cols, rows]
    for (int64_t c = 0; c < layer.cols; ++c)
      for (int64_t r = 0; r < layer.rows; ++r) m.at(r, c) = p[c * layer.rows + r];
  }
  return m;
}

Status WriteWeightMatrix(Model* model, const WeightedLayer& layer, const Matrix& weights) {
  Tensor* w = MutableWeight(model->graph, layer.weight);
  if (w == nullptr) return Status::NotFound("layer '" + layer.node + "': weight '" + layer.weight + "' not found");
  if (weights.rows != layer.rows || weights.cols != layer.cols || w->numel() != layer.rows * layer.cols) {
    return Status::InvalidArgument("layer '" + layer.node + "': writing a " + std::to_string(weights.rows) + "x" +
                                   std::to_string(weights.cols) + " matrix into weight '" + layer.weight + "' " +
                                   ShapeToString(w->shape()));
  }
  // A fresh buffer: copies of the model (the dense reference) share the old one.
  Tensor fresh(DataType::kFloat32, w->shape());
  float* p = fresh.data<float>();
  if (!layer.transposed_view) {
    std::copy(weights.values.begin(), weights.values.end(), p);
  } else {
    for (int64_t c = 0; c < layer.cols; ++c)
      for (int64_t r = 0; r < layer.rows; ++r) p[c * layer.rows + r] = weights.at(r, c);
  }
  *w = fresh;
  return Status::OK();
}

std::string StructureMismatch(const WeightedLayer& layer, const PruneStructure& s) {
  const std::string view = std::to_string(layer.rows) + "x" + std::to_string(layer.cols);
  switch (s.kind) {
    case PruneStructure::Kind::kUnstructured:
    case PruneStructure::Kind::kAuto: return "";
    case PruneStructure::Kind::kBlock:
      if (layer.rows < s.block_rows || layer.cols < s.block_cols) {
        return "block " + std::to_string(s.block_rows) + "x" + std::to_string(s.block_cols) +
               " does not fit the weight's " + view + " [outputs x inputs] view (needs at least " +
               std::to_string(s.block_rows) + " outputs and " + std::to_string(s.block_cols) + " inputs)";
      }
      return "";
    case PruneStructure::Kind::kNM:
      if (s.m < 1 || layer.cols % s.m != 0) {
        return s.ToString() + " needs the input dimension to be a multiple of " + std::to_string(s.m) +
               ", the weight's [outputs x inputs] view is " + view;
      }
      return "";
    case PruneStructure::Kind::kChannel:
      if (layer.groups != 1) {
        return "a grouped Conv (group " + std::to_string(layer.groups) +
               ") does not choose its output channels: a depthwise Conv loses those its input loses";
      }
      if (layer.rows < 2) return "a layer with one output channel cannot lose channels";
      return "";
  }
  return "unknown structure";
}

namespace {

std::string CheckStructure(const PruneStructure& s) {
  if (s.kind == PruneStructure::Kind::kBlock && (s.block_rows < 1 || s.block_cols < 1))
    return "block sizes must be >= 1, got " + s.ToString();
  if (s.kind == PruneStructure::Kind::kNM && (s.n < 1 || s.n >= s.m))
    return "in N:M, N (weights kept) must be at least 1 and less than M (group size), got " + s.ToString();
  return "";
}

bool SparsityInRange(double s) { return s >= 0.0 && s < 1.0; }

// With N:M only 0 (dense) and 1 - N/M are valid targets.
bool NMSparsityValid(const PruneStructure& s, double sparsity) {
  return s.kind != PruneStructure::Kind::kNM || sparsity == 0.0 || std::fabs(sparsity - s.FixedSparsity()) < 1e-9;
}

}  // namespace

std::string RuleOrigin(const PruneLayerRule& r, size_t index) {
  return r.origin.empty() ? "pruning rule layers[" + std::to_string(index) + "]" : r.origin;
}

Status ValidatePruneOptions(const PruneOptions& o) {
  std::vector<std::string> errors;
  auto fail = [&](const std::string& e) { errors.push_back(e); };
  if (!SparsityInRange(o.sparsity)) fail("sparsity " + FormatNumber(o.sparsity) + " is out of range: must be in [0, 1)");
  if (std::string e = CheckStructure(o.structure); !e.empty()) fail("structure: " + e);
  if (SparsityInRange(o.sparsity) && !NMSparsityValid(o.structure, o.sparsity)) {
    fail("sparsity " + FormatNumber(o.sparsity) + " does not match structure " + o.structure.ToString() +
         ": N:M fixes it at " + FormatNumber(o.structure.FixedSparsity()) + " (or 0 to leave layers dense)");
  }
  if (o.steps < 1) fail("steps is " + std::to_string(o.steps) + ": must be >= 1");
  if (o.schedule == PruneSchedule::kOneShot && o.steps != 1)
    fail("steps is " + std::to_string(o.steps) + " but a oneshot schedule takes exactly 1 (use linear or agp)");
  if (!(o.max_layer_sparsity > 0.0 && o.max_layer_sparsity < 1.0))
    fail("max_layer_sparsity " + FormatNumber(o.max_layer_sparsity) + " must be in (0, 1)");
  if (o.scope == PruneScope::kGlobal && o.structure.kind == PruneStructure::Kind::kChannel)
    fail("scope global does not apply to channel pruning (tied channels are ranked per group): use scope layer");
  if (!(o.recovery_options.damping >= 0.0)) fail("recovery damping must be >= 0");
  if (o.recovery_options.max_rows_per_sample < 1) fail("recovery max_rows_per_sample must be >= 1");
  if (o.recovery_options.cg_iterations < 1) fail("recovery cg_iterations must be >= 1");
  if (o.recovery_options.method == RecoveryMethod::kObs && !o.recovery)
    fail("recovery method obs chooses the mask during recovery: it needs recovery on");
  if (o.recovery_options.obs_block < 1) fail("recovery obs_block must be >= 1");
  if (o.reconstruction.method == PruneReconstruction::Method::kBlock) {
    if (!o.recovery) fail("reconstruction block starts from the least-squares fit: it needs recovery on");
    if (o.reconstruction.iterations < 1) fail("reconstruction iterations must be >= 1");
    if (!(o.reconstruction.learning_rate > 0.0 && o.reconstruction.learning_rate <= 1.0))
      fail("reconstruction learning_rate must be in (0, 1]");
    if (o.reconstruction.block_layers < 1) fail("reconstruction block_layers must be >= 1");
  }
  if (o.structure.kind == PruneStructure::Kind::kAuto && o.auto_candidates.empty())
    fail("structure auto needs at least one auto candidate");
  for (const auto& c : o.auto_candidates) {
    if (c.kind == PruneStructure::Kind::kAuto || c.kind == PruneStructure::Kind::kChannel)
      fail("auto candidate " + c.ToString() + " is not allowed (only unstructured, block and N:M)");
    else if (std::string e = CheckStructure(c); !e.empty()) fail("auto candidate: " + e);
  }
  for (size_t i = 0; i < o.layers.size(); ++i) {
    const PruneLayerRule& r = o.layers[i];
    const std::string what = RuleOrigin(r, i) + " ('" + r.match + "')";
    if (Status st = CheckNamePattern(r.match, what); !st.ok()) fail(st.message());
    if (!r.sparsity && !r.structure) fail(what + ": sets neither sparsity nor structure");
    if (r.sparsity && !SparsityInRange(*r.sparsity))
      fail(what + ": sparsity " + FormatNumber(*r.sparsity) + " is out of range: must be in [0, 1)");
    if (r.structure) {
      if (std::string e = CheckStructure(*r.structure); !e.empty()) fail(what + ": structure: " + e);
      if (r.structure->kind == PruneStructure::Kind::kChannel || o.structure.kind == PruneStructure::Kind::kChannel) {
        if (*r.structure != o.structure)
          fail(what + ": channel pruning cannot be mixed with other structures (channels tie layers together)");
      }
    }
    const PruneStructure s = r.structure ? *r.structure : o.structure;
    if (r.sparsity && SparsityInRange(*r.sparsity) && !NMSparsityValid(s, *r.sparsity)) {
      fail(what + ": sparsity " + FormatNumber(*r.sparsity) + " does not match structure " + s.ToString() +
           ": N:M fixes it at " + FormatNumber(s.FixedSparsity()) + " (or 0 to leave the layer dense)");
    }
  }
  if (errors.empty()) return Status::OK();
  std::string msg = "invalid pruning options:";
  for (const auto& e : errors) msg += "\n  " + e;
  return Status::InvalidArgument(msg);
}

StatusOr<std::vector<LayerPlan>> PlanPruning(const Model& model, const PruneOptions& options) {
  SPARQ_RETURN_IF_ERROR(ValidatePruneOptions(options));
  SPARQ_ASSIGN_OR_RETURN(std::vector<WeightedLayer> layers, FindWeightedLayers(model));
  std::vector<std::string> names;
  for (const auto& L : layers) names.push_back(L.node);
  // Every rule that matches nothing, and every rule naming a layer exactly
  // that it cannot apply to, is reported together.
  std::vector<std::string> unmatched, misfits;
  for (size_t i = 0; i < options.layers.size(); ++i) {
    const auto& r = options.layers[i];
    bool any = false;
    for (const auto& n : names) any |= NameMatches(r.match, n);
    if (!any) unmatched.push_back(RuleOrigin(r, i) + ": '" + r.match + "' matches no weighted layer");
  }
  if (!unmatched.empty()) {
    std::string msg = unmatched.size() == 1 ? unmatched[0] : "pruning rules that match nothing:";
    if (unmatched.size() > 1)
      for (const auto& u : unmatched) msg += "\n  " + u;
    return Status::NotFound(msg + "\n(weighted layers are Conv/Gemm/MatMul with a constant weight; this model's are: " +
                            JoinNames(names) + ")");
  }

  std::vector<LayerPlan> plans;
  for (size_t i = 0; i < layers.size(); ++i) {
    LayerPlan p;
    p.layer = layers[i];
    const std::string& name = p.layer.node;
    const PruneLayerRule* rule = nullptr;
    std::string rule_origin;
    for (size_t k = 0; k < options.layers.size(); ++k) {
      if (NameMatches(options.layers[k].match, name)) {
        rule = &options.layers[k];
        rule_origin = RuleOrigin(*rule, k);
        break;
      }
    }
    const bool exact = rule != nullptr && (rule->match == name || rule->match == EscapeRegex(name));
    p.rule = rule ? rule->match : "";
    const std::string by_rule = rule ? " (rule '" + rule->match + "')" : "";
    p.structure = rule && rule->structure ? *rule->structure : options.structure;
    p.sparsity = rule && rule->sparsity ? *rule->sparsity : options.sparsity;
    // A rule that changes the structure to N:M without a sparsity gets 1 - N/M.
    if (p.structure.kind == PruneStructure::Kind::kNM && !(rule && rule->sparsity) && p.sparsity != 0.0)
      p.sparsity = p.structure.FixedSparsity();
    auto dense = [&](const std::string& why) {
      p.prune = false;
      p.reason = why;
      plans.push_back(p);
    };
    if (p.sparsity == 0.0) {
      dense("target sparsity is 0" + by_rule);
      continue;
    }
    if (!p.layer.unsupported.empty()) {
      if (exact) {
        misfits.push_back(rule_origin + ": names layer '" + name + "', which cannot be pruned: " + p.layer.unsupported);
        continue;
      }
      dense(p.layer.unsupported);
      continue;
    }
    if (options.skip_first_last && !exact && (i == 0 || i + 1 == layers.size())) {
      dense(std::string(i == 0 ? "first" : "last") + " weighted layer (skip_first_last)");
      continue;
    }
    if (p.structure.kind == PruneStructure::Kind::kAuto) {
      bool found = false;
      std::string measured;  // what the kernel table says about the fitting candidates
      double best = 1.0;     // a candidate must beat dense
      for (const auto& c : options.auto_candidates) {
        if (c.kind == PruneStructure::Kind::kNM && std::fabs(c.FixedSparsity() - p.sparsity) > 1e-9) continue;
        if (!StructureMismatch(p.layer, c).empty()) continue;
        if (!options.kernel_table) {  // no measurements: the first that fits
          p.structure = c;
          found = true;
          break;
        }
        std::optional<double> speedup = options.kernel_table->SpeedupAt(options.backend, c.ToString(), p.sparsity);
        // A backend's own kernels have rows of their own ("cuda.wmma": sparq's
        // block-sparse kernels beside cuSPARSE's "cuda"); its rows run the faster.
        const std::optional<double> own =
            options.kernel_table->SpeedupAt(options.backend + ".wmma", c.ToString(), p.sparsity);
        if (own && (!speedup || *own > *speedup)) speedup = own;
        measured += (measured.empty() ? "" : ", ") + c.ToString() + " " +
                    (speedup ? FormatDouble("%.2fx", *speedup) : std::string("not measured"));
        if (speedup && *speedup > best) {
          best = *speedup;
          p.structure = c;
          p.kernel_speedup = *speedup;
          found = true;
        }
      }
      if (!found && options.kernel_table && !measured.empty()) {
        // Sparsity this layer's kernels cannot turn into speed: leave it dense.
        dense("no sparse kernel on " + options.backend + " beats dense at " + FormatDouble("%.0f%%", 100 * p.sparsity) +
              " (" + measured + ")");
        continue;
      }
      if (!found) {
        if (exact) {
          misfits.push_back(rule_origin + ": no auto candidate fits layer '" + name + "'");
          continue;
        }
        dense("no auto candidate fits the weight's " + std::to_string(p.layer.rows) + "x" + std::to_string(p.layer.cols) + " view");
        continue;
      }
    }
    const std::string mismatch = StructureMismatch(p.layer, p.structure);
    if (!mismatch.empty()) {
      if (exact) {
        misfits.push_back(rule_origin + ": asks for " + p.structure.ToString() + " on layer '" + name +
                          "', which it does not fit: " + mismatch);
        continue;
      }
      dense(mismatch + by_rule);
      continue;
    }
    p.prune = true;
    plans.push_back(p);
  }
  if (!misfits.empty()) {
    std::string msg = misfits.size() == 1 ? misfits[0] : "pruning rules that do not fit their layers:";
    if (misfits.size() > 1)
      for (const auto& m : misfits) msg += "\n  " + m;
    return Status::InvalidArgument(msg);
  }
  // Channel pruning also depends on the graph around each layer. Dropping a
  // layer can untie others, so repeat until nothing changes.
  if (options.structure.kind == PruneStructure::Kind::kChannel) {
    while (true) {
      std::map<std::string, std::string> dense;
      SPARQ_RETURN_IF_ERROR(ChannelPlanReasons(model, plans, &dense));
      if (dense.empty()) break;
      for (LayerPlan& p : plans) {
        auto it = dense.find(p.layer.node);
        if (it == dense.end()) continue;
        p.prune = false;
        p.reason = it->second;
      }
    }
  }
  return plans;
}

}  // namespace sparq
