// Folding an If whose condition is decided by constants (internal): the
// taken branch is inlined into the graph around it, the other one dropped.
//
//   sr (pinned 16000) ── Equal(16000) ── If ──┬── then: Conv ... LSTM ──> y
//                                             └── else: Conv ... LSTM ──> y
//   =>  the then-branch's nodes in the outer graph, writing y; no If, no sr
//
// What may decide a condition: initializers that a run cannot override
// (not listed as graph inputs), Constant nodes, and the inputs in `pinned`,
// the values the caller promises every run feeds (a recipe's
// data.constants). The model written from the result is right only for
// those values, so each pinned input that a folded condition read leaves
// the graph's inputs: a caller feeding it gets an error ("not an input")
// rather than the pinned branch's answer for another value.
//
// Inlining keeps the branch's names where they are free in the outer graph
// (names of every subgraph count as taken) and gives the others fresh names
// (GraphEditor::FreshName), rewriting the reads of a renamed value inside
// nested subgraphs too; the branch's reads of outer values need no change.
// A branch output that a branch node computes takes the If's output name;
// any other (an outer value, a branch initializer, an output listed twice)
// is copied by an Identity. Nested Ifs that become outer nodes are folded in
// turn when their condition is decided; the rest (a condition on a shape or
// a run input) stay as they are.
#pragma once

#include <string>
#include <vector>

#include "sparq/graph.h"
#include "sparq/status.h"
#include "sparq/executor.h"  // TensorMap

namespace sparq {

struct FoldedIf {
  std::string node;       // the If, as Node::Describe() names it
  std::string condition;  // the value its condition read
  bool taken = false;     // true: then_branch inlined; false: else_branch
  int64_t nodes = 0;      // nodes of the taken branch now in the outer graph
};

struct IfFoldReport {
  std::vector<FoldedIf> folded;              // in the order folded
  std::vector<std::string> inputs_removed;   // pinned inputs a folded condition read (no longer inputs)
};

// Inlines the taken branch of every If (default domain) of the outer graph
// whose condition is computable from constants and the `pinned` inputs (name
// -> the value fed on every run; names that are not graph inputs are
// ignored), repeatedly, so that nested Ifs decided by the same constants fold
// too. A model with no such If is left exactly as it was (pinned inputs
// included). Errors name the If: a decided condition that is not one bool,
// a missing branch, a branch with inputs or with another number of outputs
// than the node; and the constant folding that computes the conditions.
StatusOr<IfFoldReport> FoldDecidedIfs(Model* model, const TensorMap& pinned);

}  // namespace sparq
