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
// values are not observed (GraphProfile::kObserveKept and kDeployment).
#pragma once

#include <string>
#include <vector>

#include "sparq/graph.h"
#include "sparq/status.h"

namespace sparq {

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
// has that one reader and is not a graph output. Returns the folded Pads' names.
std::vector<std::string> FoldPadsIntoConvs(Model* model);

}  // namespace sparq
