// Channel pruning: remove whole output channels from the graph and rewrite
// the consumers.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sparq/export.h"
#include "sparq/graph.h"
#include "sparq/status.h"

namespace sparq {

// Output channels of several producers that must be removed together
// (residual Add, Concat followed by Add, depthwise chains), with whether the
// group can be pruned at all.
struct SPARQ_API ChannelGroup {
  std::vector<std::string> producers;  // Conv (group 1) / Gemm / MatMul nodes, graph order
  int64_t classes = 0;                 // independent channel sets (a channel removed from all producers at once)
  std::string locked_reason;           // "" when prunable, else why not
};

// Traces every prunable producer's output channels through channel-wise ops
// (BatchNormalization, activations, pools, depthwise Conv, per-channel
// constants, Add/Mul/... of tied tensors, Concat along channels, Flatten or
// Reshape [N, C, 1, 1] -> [N, C]) to the consumers that can drop input
// channels (Conv, Gemm, MatMul). A path to anything else (a graph output, a
// Reshape of a spatial map, Softmax, ...) locks the group, with the reason.
SPARQ_API StatusOr<std::vector<ChannelGroup>> AnalyzeChannels(const Model& model);

struct SPARQ_API ChannelRemovalReport {
  struct Producer {
    std::string node;
    int64_t channels_before = 0, channels_after = 0;
  };
  std::vector<Producer> producers;  // those that lost channels
  int64_t params_before = 0, params_after = 0;  // all float initializers
  std::vector<std::pair<std::string, std::string>> skipped;  // (producer, reason) with zero rows but locked
};

// Removes every output channel whose weight row is all zero in every producer
// of its channel class, slicing the producers' weights and biases, BatchNorm
// and per-channel constants on the way, and the consumers' input channels.
// A removed channel's constant value (its bias carried through BatchNorm,
// activations, pools) is folded into the consumers' biases: exact for Gemm,
// MatMul and unpadded Conv, approximate at the padded borders of larger
// Conv kernels. Graph value_info is re-inferred. Channels of locked groups
// stay. Errors: those of AnalyzeChannels; NotSupported when a rewrite would
// touch a weight it cannot slice.
SPARQ_API StatusOr<ChannelRemovalReport> RemoveZeroChannels(Model* model);

}  // namespace sparq
