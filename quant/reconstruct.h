// Block-wise reconstruction (BRECQ family; internal to quant and the layers
// above it): after pruning (and its per-layer least squares), each block of a
// compressed model (a residual block, a transformer sub-layer: a few weighted
// layers between single-tensor cuts of the graph) is fitted by Adam so its
// output matches the DENSE model's block output on the calibration data, with
// the block's inputs taken from the compressed model fitted so far
// (sequential). Weights that are 0 stay exactly 0 (the pruning mask), biases
// move freely. Unlike the per-layer fit, later layers of a block compensate
// earlier ones through the nonlinearities between them.
//
//   dense:       x_d ── [block b of the dense model] ──> t      (targets)
//   compressed:  x_c ── [block b, weights W] ──────────> y      min_W |y - t|^2
//                (x_c: the compressed model's input of block b, earlier blocks fitted)
//
// Forward passes run the block as a small model on the executor (weights fed
// as inputs); gradients come from kernels/ref/grad.h.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sparq/dataset.h"
#include "sparq/graph.h"
#include "sparq/status.h"

namespace sparq {

struct BlockReconstructionOptions {
  int iterations = 200;          // Adam steps per block, one calibration batch each, batches in order
  double learning_rate = 1e-3;   // Adam's step at the start, decayed by a cosine to 0 at the last step
  int block_layers = 2;          // a block closes at the first cut once it holds this many weighted layers
  int threads = 0;               // 0 = one per hardware thread
  std::function<void(const std::string&)> log;  // one line per block; optional
};

// A block of a model whose constant subgraphs are folded (FoldConstants).
struct ReconstructionBlock {
  std::vector<size_t> nodes;         // node indices, in graph order
  std::vector<std::string> inputs;   // values the nodes read that none of them makes (no initializers)
  std::vector<std::string> outputs;  // values of the block read after it (or graph outputs)
  std::vector<std::string> params;   // initializers fitted: weights (masked by their zeros) and biases
  std::vector<bool> masked;          // per param: a weight (zeros held) or a bias
  int64_t weighted_layers = 0;
  // The first node on the gradient path whose op has no backward here
  // ("" when every one has): such a block is left as it is.
  std::string unsupported;
};

// Cuts `model` (constants folded, topologically sorted) into blocks. A cut is a
// point in graph order where exactly one activation is live (computed and read
// later): activations are the values that depend on a weighted layer's output
// and the inputs weighted layers multiply. Values that depend on no weighted
// layer (the graph inputs, attention masks, shapes) are block inputs wherever
// they are read. Consecutive segments between cuts are joined until a
// block holds options.block_layers weighted layers; segments without weighted
// layers join the block before them. Nodes that depend on no weighted layer
// belong to no block (the first block starts at the first weighted layer).
StatusOr<std::vector<ReconstructionBlock>> FindReconstructionBlocks(const Model& model, int block_layers);

struct BlockReconstructionReport {
  struct Block {
    std::string first_node, last_node;
    int64_t weighted_layers = 0;
    // Relative error sum |y - t|^2 / sum |t|^2 of the block output on the
    // held-out calibration batches (every 4th; all of them when there are
    // fewer than 4), before and after the fit.
    double error_before = 0.0, error_after = 0.0;
    bool kept = false;     // the fit lowered the error: the best checkpoint (every quarter of the iterations) was kept
    std::string skipped;   // why the block was not fitted ("" when it was)
    double seconds = 0.0;
  };
  std::vector<Block> blocks;
  int64_t batches = 0;  // calibration batches (the minibatches)
};

// Fits every block of `compressed` (a copy of `dense` with changed weights, the
// same graph) as described above and writes the fitted weights and biases into
// it. Errors: InvalidArgument when the models' graphs differ or no batch
// comes, or the data is not finite; the executor's errors. The fit steps
// through the fit batches of quant/holdout.h's split (3 of every 4); the
// error on the held-out batches is measured every quarter of the iterations
// and the best weights seen are kept, the start included, so a block is never
// worse than its start on data it was not fitted on (with fewer than 4
// batches every batch does both).
StatusOr<BlockReconstructionReport> ReconstructBlocks(const Model& dense, Model* compressed, const BatchSource& data,
                                                      const BlockReconstructionOptions& options);

}  // namespace sparq
