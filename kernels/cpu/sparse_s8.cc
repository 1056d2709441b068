#include "kernels/cpu/sparse_s8.h"

#include <algorithm>
#include <optional>

#include "kernels/cpu/dispatch.h"

namespace sparq {
namespace {

// Fraction of the br x bc blocks of W (edge blocks partial) that are all zero.
double ZeroBlockFraction(const int8_t* w, int64_t n, int64_t k, int br, int bc) {
  const int64_t brows = (n + br - 1) / br, bcols = (k + bc - 1) / bc;
  if (brows * bcols == 0) return 0.0;
  std::vector<uint8_t> nonzero(static_cast<size_t>(brows * bcols), 0);
  for (int64_t r = 0; r < n; ++r) {
    uint8_t* flags = nonzero.data() + (r / br) * bcols;
    const int8_t* row = w + r * k;
    for (int64_t c = 0; c < k; ++c) flags[c / bc] |= row[c] != 0;
  }
  const int64_t zero = std::count(nonzero.begin(), nonzero.end(), uint8_t{0});
  return static_cast<double>(zero) / static_cast<double>(brows * bcols);
}

// True when every group of m consecutive columns of every row holds <= keep nonzeros.
bool FitsNm(const int8_t* w, int64_t n, int64_t k, int keep, int m) {
  for (int64_t r = 0; r < n; ++r) {
    const int8_t* row = w + r * k;
    for (int64_t c0 = 0; c0 < k; c0 += m) {
      int count = 0;
      for (int64_t c = c0; c < std::min(k, c0 + m); ++c) count += row[c] != 0;
      if (count > keep) return false;
    }
  }
  return true;
}

}  // namespace

StatusOr<SparseS8Weights> ChooseSparseS8(const int8_t* w, int64_t n, int64_t k, const KernelSpeedTable& table) {
  struct Candidate {
    PackedFormat format;
    const char* structure;  // the table's spelling
    const char* kernel;
  };
  static constexpr Candidate kCandidates[] = {
      {PackedFormat::kBsr1x4S8, "block1x4", "spmm_bsr1x4_s8"},
      {PackedFormat::kBsr4x1S8, "block4x1", "spmm_bsr4x1_s8"},
      {PackedFormat::kBsr4x4S8, "block4x4", "spmm_bsr4x4_s8"},
      {PackedFormat::kBsr8x8S8, "block8x8", "spmm_bsr8x8_s8"},
      {PackedFormat::kBsr16x16S8, "block16x16", "spmm_bsr16x16_s8"},
      {PackedFormat::kNm2of4S8, "2:4", "spmm_nm24_s8"},
      {PackedFormat::kNm4of8S8, "4:8", "spmm_nm48_s8"},
  };
  SparseS8Weights best;
  const Candidate* chosen = nullptr;
  for (const Candidate& c : kCandidates) {
    const PackedFormatTraits& t = Traits(c.format);
    double sparsity = 0.0;
    if (t.kind == LayoutKind::kNm) {
      if (!FitsNm(w, n, k, t.nm_keep, t.block_cols)) continue;
      sparsity = 1.0 - static_cast<double>(t.nm_keep) / t.block_cols;
    } else {
      sparsity = ZeroBlockFraction(w, n, k, t.block_rows, t.block_cols);
    }
    if (sparsity <= 0.0) continue;
    const std::optional<double> speedup = table.MeasuredAtOrBelow("cpu", c.structure, "s8", sparsity);
    if (!speedup || *speedup <= std::max(1.0, best.speedup)) continue;
    chosen = &c;
    best.sparsity = sparsity;
    best.speedup = *speedup;
  }
  if (chosen == nullptr) return best;
  best.kind = Traits(chosen->format).kind;
  best.kernel = chosen->kernel;
  if (best.kind == LayoutKind::kNm) {
    SPARQ_ASSIGN_OR_RETURN(best.nm, PackNm(w, n, k, chosen->format));
  } else {
    SPARQ_ASSIGN_OR_RETURN(best.bsr, PackBsr(w, n, k, chosen->format));
  }
  return best;
}

Status RunSparseS8(const SparseS8Weights& weights, SpmmLayout layout, int64_t m, const void* x, bool x_signed,
                   int64_t ld_x, int32_t x_zero_point, const S8Epilogue& out, ThreadPool* pool) {
  auto fill = [&](auto& args) {
    args.layout = layout;
    args.m = m;
    args.x = x;
    args.x_signed = x_signed;
    args.ld_x = ld_x;
    args.x_zero_point = x_zero_point;
    args.out = out;
    args.pool = pool;
  };
  if (weights.kind == LayoutKind::kNm) {
    SpmmNmS8Args args;
    fill(args);
    args.w = &weights.nm;
    return RunSpmmNmS8(args);
  }
  SpmmBsrS8Args args;
  fill(args);
  args.w = &weights.bsr;
  return RunSpmmBsrS8(args);
}

}  // namespace sparq
