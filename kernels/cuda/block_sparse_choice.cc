#include "kernels/cuda/block_sparse_choice.h"

#include <cstdio>

#include "kernels/cuda/layouts.h"

namespace sparq {
namespace cuda {
namespace {

std::string Structure(int64_t b) { return "block" + std::to_string(b) + "x" + std::to_string(b); }

std::string Percent(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f%%", 100.0 * v);
  return buf;
}

std::string Times(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2fx", v);
  return buf;
}

}  // namespace

const char* BlockSparseKernelName(BlockSparseKernel kernel) {
  return kernel == BlockSparseKernel::kWmma ? "wmma" : "cusparse";
}

template <typename T>
StatusOr<BlockSparseChoice> ChooseGpuBlockSparse(const KernelSpeedTable& table, const std::string& precision,
                                                 bool wmma_available, const T* wt, int64_t n, int64_t k) {
  if (n < 1 || k < 1) return Status::InvalidArgument("block-sparse choice for an empty weight");
  const KernelTableLayer layer{false, k};
  bool has_rows = false;
  for (int64_t b : kGpuSparseBlocks) {
    has_rows = has_rows || table.MeasuredAtOrBelow(kCusparseTableBackend, Structure(b), precision, 1.0, &layer);
    if (wmma_available)
      has_rows = has_rows || table.MeasuredAtOrBelow(kWmmaTableBackend, Structure(b), precision, 1.0, &layer);
  }
  bool found = false;
  BlockSparseChoice best;
  std::string why;
  for (int64_t b : kGpuSparseBlocks) {
    if (k % b != 0 || n % b != 0) continue;
    const double s = BlockSparsity(wt, n, k, k, b);
    why += (why.empty() ? "" : "; ") + Percent(s) + " zero blocks of " + std::to_string(b);
    if (!has_rows) {
      if (!found && s >= kDefaultMinBlockSparsity) {
        best = BlockSparseChoice{b, s, 0.0, BlockSparseKernel::kCusparse};
        found = true;
      }
      continue;
    }
    const std::optional<double> cusparse = table.MeasuredAtOrBelow(kCusparseTableBackend, Structure(b), precision, s, &layer);
    why += std::string(": cuSPARSE ") + (cusparse ? Times(*cusparse) : "not measured");
    bool own = false;  // sparq's own wmma kernel measured faster than cuSPARSE (or cuSPARSE not measured)
    double speedup = cusparse.value_or(0.0);
    if (wmma_available) {
      const std::optional<double> wmma = table.MeasuredAtOrBelow(kWmmaTableBackend, Structure(b), precision, s, &layer);
      why += std::string(", wmma ") + (wmma ? Times(*wmma) : "not measured");
      if (wmma && (!cusparse || *wmma > *cusparse)) {
        own = true;
        speedup = *wmma;
      }
    }
    if (speedup > 1.0 && (!found || speedup > best.speedup)) {
      best = BlockSparseChoice{b, s, speedup, own ? BlockSparseKernel::kWmma : BlockSparseKernel::kCusparse};
      found = true;
    }
  }
  if (found) return best;
  if (why.empty()) return Status::NotSupported("weight dims not multiples of 32");
  return Status::NotSupported(has_rows ? "no block-sparse GPU kernel beats dense here (" + why + ")"
                                       : "block sparsity below " + Percent(kDefaultMinBlockSparsity) + " (" + why + ")");
}

StatusOr<SignedSparseWeight> SignedWeightForSparse(const Tensor& w, const Tensor* zero_point) {
  if ((w.dtype() != DataType::kInt8 && w.dtype() != DataType::kUInt8) || w.rank() != 2 || !w.device().is_host()) {
    return Status::NotSupported("the block-sparse INT8 rows take a 2-D int8 / uint8 weight on the host");
  }
  const bool shifted = w.dtype() == DataType::kUInt8;
  const int64_t k = w.dim(0), n = w.dim(1);
  if (zero_point == nullptr && shifted) {
    return Status::NotSupported("the block-sparse INT8 rows take symmetric weights (zero point 128 for uint8), not 0");
  }
  if (zero_point != nullptr) {
    if (zero_point->dtype() != w.dtype() || !zero_point->device().is_host() ||
        (zero_point->numel() != 1 && zero_point->numel() != n)) {
      return Status::NotSupported("the block-sparse INT8 rows take a weight zero point of the weight's type, per tensor or per column");
    }
    for (int64_t i = 0; i < zero_point->numel(); ++i) {
      if (zero_point->GetAsDouble(i) != (shifted ? 128.0 : 0.0)) {
        return Status::NotSupported(std::string("the block-sparse INT8 rows take symmetric weights (zero point ") +
                                    (shifted ? "128 for uint8" : "0 for int8") + "), not " +
                                    std::to_string(static_cast<int>(zero_point->GetAsDouble(i))));
      }
    }
  }
  SignedSparseWeight s;
  s.n = n;
  s.k = k;
  s.wt.resize(static_cast<size_t>(n * k));
  s.row_sums.assign(static_cast<size_t>(n), 0);
  const uint8_t* src = static_cast<const uint8_t*>(w.raw_data());
  for (int64_t r = 0; r < k; ++r)
    for (int64_t c = 0; c < n; ++c) {
      const int8_t v = static_cast<int8_t>(shifted ? src[r * n + c] ^ 0x80u : src[r * n + c]);
      s.wt[static_cast<size_t>(c * k + r)] = v;
      s.row_sums[static_cast<size_t>(c)] += v;
    }
  return s;
}

template StatusOr<BlockSparseChoice> ChooseGpuBlockSparse<uint16_t>(const KernelSpeedTable&, const std::string&, bool,
                                                                    const uint16_t*, int64_t, int64_t);
template StatusOr<BlockSparseChoice> ChooseGpuBlockSparse<int8_t>(const KernelSpeedTable&, const std::string&, bool,
                                                                  const int8_t*, int64_t, int64_t);

}  // namespace cuda
}  // namespace sparq
