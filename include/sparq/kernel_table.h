// The kernel speed table: how much faster sparq's sparse kernels run than the
// dense kernel of the same precision, per backend, sparse structure and
// sparsity, as bench/kernels_bench measures it (bench/KERNELS.md). Two users:
// the executor runs a layer sparse only when its structure beats dense at its
// sparsity (ExecutorOptions::kernel_table), and the pruner's `structure: auto`
// picks the fastest structure (PruneOptions::kernel_table).
//
// A CSV file, '#' lines are comments; the precision column is optional:
//
//   backend,structure,precision,sparsity,speedup
//   cpu,block4x4,s8,0.8,2.74
//   cpu,2:4,f32,0.5,0.90
//
// structure: "unstructured", "block<R>x<C>" (R, C >= 1), "<N>:<M>" (1 <= N < M).
// precision: "f32", "f16" (the CUDA rows' float16 kernels) or "s8"; a file without the column (header
// backend,structure,sparsity,speedup) has rows for any precision.
// backend: "cpu", "cuda" (on the GPU: cuSPARSE's Blocked-ELL SpMM against
// dense cuBLASLt), or "cuda.wmma" (sparq's own tensor-core kernel over the
// same layout, kernels/cuda/spmm_bell_wmma.cu, against the same dense
// GEMM); the GPU rows are written by bench/gpu_bench.cu --speedups.
// speedup = dense time / sparse time (> 1: the sparse kernel is faster).
//
// An optional last column `shape` keys a row by the layer's shape class
// (header backend,structure,precision,sparsity,speedup,shape):
//
//   any                   every layer (as a row without the column)
//   conv | matmul         convolutions (NCHW, the transposed sparse layout) or
//                         row-major MatMul / Gemm layers
//   conv:k<2048           ... whose reduction size K (in_channels x kernel
//   matmul:k>=768         window, or MatMul's inner dim) is below / at least N
//
// For a layer, the executor uses the rows of the structure whose shape class
// matches it when there are any, else the `any` rows: a structure that wins
// on average but loses on this layer's shape stays dense there.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sparq/export.h"
#include "sparq/status.h"

namespace sparq {

// The shape class of one weighted layer, for the table's `shape` column.
struct SPARQ_API KernelTableLayer {
  bool conv = false;  // convolution (else MatMul / Gemm)
  int64_t k = 0;      // reduction size
};

struct SPARQ_API KernelSpeedTable {
  struct Row {
    std::string backend;    // "cpu", "cuda", "cuda.wmma"
    std::string structure;  // "block4x4", "2:4", "unstructured"
    std::string precision;  // "f32", "f16", "s8", or "" (any)
    double sparsity = 0.0;  // in [0, 1)
    double speedup = 0.0;   // > 0
    std::string shape;      // "" (any layer), or "conv" / "matmul" with an optional ":k<N" / ":k>=N"
  };
  std::vector<Row> rows;

  // Errors: InvalidArgument naming every bad line ("what:line: ..."; `what`
  // names the file), or a missing or unknown header.
  static StatusOr<KernelSpeedTable> Parse(const std::string& csv, const std::string& what);
  // Errors: NotFound, IOError, and those of Parse.
  static StatusOr<KernelSpeedTable> Load(const std::string& path);
  // The table compiled into the library from bench/kernel_speedups.csv at
  // build time (no file is read at run time). Thread safe.
  static const KernelSpeedTable& Default();

  // The speed-up of `structure` on `backend` at `sparsity`, interpolated
  // linearly between the two nearest measured sparsities; above the measured
  // range the highest one's (sparser only gets faster); nullopt below it or
  // when the pair was never measured. `precision` "" takes the s8 rows when
  // the pair has any (sparq prunes, then quantizes), else the others. Rows
  // keyed by a shape class are not used here (the pruner picks one
  // structure for every layer).
  std::optional<double> SpeedupAt(const std::string& backend, const std::string& structure, double sparsity,
                                  const std::string& precision = "") const;
  // The executor's rule: the speed-up measured at the highest sparsity at or
  // below `sparsity` for exactly this precision (or rows of any precision);
  // nullopt when nothing is measured there (the layer then stays dense).
  // With `layer`, the rows keyed by a shape class that matches it, when the
  // structure has any such row, else the rows for any layer; without, only
  // the rows for any layer.
  std::optional<double> MeasuredAtOrBelow(const std::string& backend, const std::string& structure,
                                          const std::string& precision, double sparsity,
                                          const KernelTableLayer* layer = nullptr) const;
};

// Checks a structure spelling of the table (see above) and returns it;
// InvalidArgument saying what is wrong otherwise.
SPARQ_API StatusOr<std::string> ParseKernelTableStructure(const std::string& text);
// Checks a shape class spelling (see above); "any" becomes "". InvalidArgument otherwise.
SPARQ_API StatusOr<std::string> ParseKernelTableShape(const std::string& text);
// Whether `layer` is in the shape class `shape` (a ParseKernelTableShape result).
SPARQ_API bool KernelTableShapeMatches(const std::string& shape, const KernelTableLayer& layer);

}  // namespace sparq
