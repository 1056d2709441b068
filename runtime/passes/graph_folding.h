// Graph folding at executor creation (internal): work that does not depend on
// the run inputs is done once, at load, instead of at every run.
//
//   constant subgraphs      Constant / ConstantOfShape / Shape arithmetic on
//                           initializers (torch's ZeroPad2d pads, Clip bounds
//                           behind a Cast, QuantizeLinear of a Constant node's
//                           float weight, ...) evaluated once on the
//                           reference kernels and replaced by initializers.
//   Pad into Conv           x ── Pad(0) ── Conv(pads p)      => x ── Conv(pads p + pad)
//                           x ── Pad(0) ── Q ── DQ ── Conv   => x ── Q ── DQ ── Conv(pads p + pad)
//                           (the quantized form when DQ(Q(0)) is exactly 0,
//                           i.e. Q's and DQ's zero points are equal: a
//                           DQ -> Pad -> Q pattern then no longer splits the
//                           integer convolution that QDQ fusion makes).
//
// Both leave the values the graph computes unchanged (same bits); the folded
// intermediate values no longer exist, so these run only where intermediate
// values are not observed (GraphProfile::kObserveKept and kDeployment), or
// are observed through their aliases (a folded zero Pad's output is its
// input with zeros around it: ValueAlias, Executor::ValueAliases).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "sparq/executor.h"
#include "sparq/graph.h"
#include "sparq/status.h"

namespace sparq {

// Graph outputs a rewrite may fold away all the same, saying how each is
// rebuilt (ExecutorOptions::keep_values_as_aliases): the executor's kept
// values, which are graph outputs while the rewrites run.
struct FoldableOutputs {
  std::set<std::string> names;   // outputs that may become aliases
  std::vector<ValueAlias> made;  // those that did, in the order folded
};

// Evaluates every node whose inputs are all constants (initializers that run
// inputs cannot override, or outputs of such nodes) on the reference
// kernels and replaces those nodes by initializers. Not folded: nodes with
// subgraphs, random ops, DequantizeLinear (QDQ fusion reads it), and nodes of
// other domains. QuantizeLinear of constants is folded (a float weight as a
// Constant node -> QuantizeLinear -> DequantizeLinear becomes int8 weights
// with their DequantizeLinear, bit for bit what QuantizeLinear computes). Returns the folded nodes' names; an
// error only when a folded node fails (the graph would fail at run time too).
StatusOr<std::vector<std::string>> FoldConstants(Model* model);

// Folds constant-mode Pad nodes with zero pad value and constant pads on the
// spatial axes only into the following Conv (auto_pad NOTSET), directly or
// through a Q -> DQ pair with equal zero points, when each value on the way
// has that one reader and is not a graph output. A Pad output in
// `foldable->names` (not an initializer's Pad) folds too: the Pad's input
// takes its place among the graph outputs and the pair is appended to
// `foldable->made`. Returns the folded Pads' names.
std::vector<std::string> FoldPadsIntoConvs(Model* model, FoldableOutputs* foldable = nullptr);

}  // namespace sparq
