// Weight pruning: zero the least important weights of Conv / Gemm / MatMul
// layers in shapes that sparse kernels can speed up, recover the accuracy
// without labels or training, and (for whole channels) really shrink the model.
//
//   ┌──────────────────────── one step of the schedule ─────────────────────────┐
//   │ weights ─scores─> masks (structure, sparsity) ─apply─> evaluate (masked)  │
//   │            ^                                             │                │
//   │   activation norms                      recover (least squares on         │
//   │   (calibration data)                    calibration data) ─> evaluate     │
//   └────────────────────────────────────────────────────────────────────────────┘
//       then, for `channel`: remove the zeroed channels from the graph.
//
// The GEMM view of each weight: sparq/weighted_layer.h.
//
// Exact zeros: see sparq/prune_masks.h.
//
// The API, one concept a header (all included here):
//   prune_structure.h    PruneStructure: the shape of the zeros
//   prune_masks.h        Matrix, PruneMask, PruneScore, ElementScores, ComputeMask
//   prune_schedule.h     PruneSchedule, ScheduleSparsities
//   prune_layers.h       weights in their GEMM view (WeightedLayer: weighted_layer.h)
//   prune_recovery.h     RecoveryOptions, LayerStatistics, RecoverLayer, RecoverModel
//   prune_retrain.h      the retrain hook (PruneRetrainFn), MakeRetrainCommand
//   prune_options.h      PruneOptions, PruneLayerRule, PruneScope, LayerPlan, PlanPruning
//   prune_channels.h     AnalyzeChannels, RemoveZeroChannels
//   prune_model.h        PruneModel, PruneMetricFn, PruneReport
//   prune_sensitivity.h  SensitivityAnalysis, AllocateSparsity
//
// Thread safety: every function here is reentrant; none keeps global state.
#pragma once

#include "sparq/prune_channels.h"
#include "sparq/prune_layers.h"
#include "sparq/prune_masks.h"
#include "sparq/prune_model.h"
#include "sparq/prune_options.h"
#include "sparq/prune_recovery.h"
#include "sparq/prune_retrain.h"
#include "sparq/prune_schedule.h"
#include "sparq/prune_sensitivity.h"
#include "sparq/prune_structure.h"
#include "sparq/weighted_layer.h"
