#include "kernels/cpu/sparse_s8.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "kernels/cpu/dispatch.h"

namespace sparq {
namespace {

// What the candidates need to know of W, from one pass over it. Columns are
// cut into groups of 4 (the last one zero padded); per row and group:
// whether it holds a nonzero and how many.
struct WeightProfile {
  int64_t n = 0, k = 0, groups = 0;  // groups = ceil(k / 4)
  std::vector<uint8_t> count4;       // [n][groups]: nonzeros in the group (0..4)
  std::vector<uint8_t> column_nz4;   // [ceil(n / 4)][k]: column holds a nonzero in the 4-row block row

  explicit WeightProfile(const int8_t* w, int64_t rows, int64_t cols)
      : n(rows), k(cols), groups((cols + 3) / 4), count4(static_cast<size_t>(rows * groups)),
        column_nz4(static_cast<size_t>((rows + 3) / 4 * cols)) {
    for (int64_t r = 0; r < n; ++r) {
      const int8_t* row = w + r * k;
      uint8_t* counts = count4.data() + r * groups;
      uint8_t* column_flags = column_nz4.data() + (r / 4) * k;
      // Per column, not counts[g] = (row[4g] != 0) + ... + (row[4g+3] != 0): GCC 12.2
      // vectorizes that sum into uint8 wrongly (each true counts -1: 254 for
      // two nonzeros at -O2, reproduced in a 10-line program).
      for (int64_t c = 0; c < k; ++c) {
        const uint8_t nonzero = row[c] != 0 ? 1 : 0;
        column_flags[c] |= nonzero;
        counts[c >> 2] = static_cast<uint8_t>(counts[c >> 2] + nonzero);
      }
    }
  }

  // Fraction of the br x bc blocks (edge blocks partial) that are all zero.
  // bc is 1 (with br = 4) or a multiple of 4.
  double ZeroBlockFraction(int br, int bc) const {
    const int64_t brows = (n + br - 1) / br, bcols = (k + bc - 1) / bc;
    if (brows * bcols == 0) return 0.0;
    int64_t zero = 0;
    if (bc == 1) {  // 4x1: the column flags of each 4-row block row
      for (uint8_t f : column_nz4) zero += f == 0;
      return static_cast<double>(zero) / static_cast<double>(brows * bcols);
    }
    const int64_t groups_per_block = bc / 4;
    std::vector<uint8_t> nonzero(static_cast<size_t>(bcols));
    for (int64_t br0 = 0; br0 < n; br0 += br) {
      std::fill(nonzero.begin(), nonzero.end(), uint8_t{0});
      for (int64_t r = br0; r < std::min(n, br0 + br); ++r) {
        const uint8_t* counts = count4.data() + r * groups;
        for (int64_t g = 0; g < groups; ++g) nonzero[g / groups_per_block] |= counts[g] != 0;
      }
      zero += std::count(nonzero.begin(), nonzero.end(), uint8_t{0});
    }
    return static_cast<double>(zero) / static_cast<double>(brows * bcols);
  }

  // True when every group of m (4 or 8) columns of every row holds <= keep nonzeros.
  bool FitsNm(int keep, int m) const {
    const int64_t per = m / 4;  // groups of 4 per group of m
    for (int64_t r = 0; r < n; ++r) {
      const uint8_t* counts = count4.data() + r * groups;
      for (int64_t g = 0; g < groups; g += per) {
        int count = counts[g] + (per == 2 && g + 1 < groups ? counts[g + 1] : 0);
        if (count > keep) return false;
      }
    }
    return true;
  }
};

}  // namespace

StatusOr<SparseS8Weights> ChooseSparseS8(const int8_t* w, int64_t n, int64_t k, const KernelSpeedTable& table,
                                         bool conv) {
  const KernelTableLayer layer{conv, k};
  struct Candidate {
    PackedFormat format;
    const char* structure;  // the table's spelling
  };
  static constexpr Candidate kCandidates[] = {
      {PackedFormat::kBsr1x4S8, "block1x4"},
      {PackedFormat::kBsr4x1S8, "block4x1"},
      {PackedFormat::kBsr4x4S8, "block4x4"},
      {PackedFormat::kBsr8x8S8, "block8x8"},
      {PackedFormat::kBsr16x16S8, "block16x16"},
      {PackedFormat::kNm2of4S8, "2:4"},
      {PackedFormat::kNm4of8S8, "4:8"},
  };
  SparseS8Weights best;
  const Candidate* chosen = nullptr;
  const WeightProfile profile(w, n, k);
  for (const Candidate& c : kCandidates) {
    const PackedFormatTraits& t = Traits(c.format);
    // Structures the table has no s8 row for need no look at the weights.
    if (!table.MeasuredAtOrBelow("cpu", c.structure, "s8", 1.0, &layer)) continue;
    double sparsity = 0.0;
    if (t.kind == LayoutKind::kNm) {
      if (!profile.FitsNm(t.nm_keep, t.block_cols)) continue;
      sparsity = 1.0 - static_cast<double>(t.nm_keep) / t.block_cols;
    } else {
      sparsity = profile.ZeroBlockFraction(t.block_rows, t.block_cols);
    }
    if (sparsity <= 0.0) continue;
    const std::optional<double> speedup = table.MeasuredAtOrBelow("cpu", c.structure, "s8", sparsity, &layer);
    if (!speedup || *speedup <= std::max(1.0, best.speedup)) continue;
    chosen = &c;
    best.sparsity = sparsity;
    best.speedup = *speedup;
  }
  if (chosen == nullptr) return best;
  best.kind = Traits(chosen->format).kind;
  const CpuOp op = best.kind == LayoutKind::kNm ? CpuOp::kSpmmNmS8 : CpuOp::kSpmmBsrS8;
  const CpuKernelDef* def = SelectCpuKernel(op, chosen->format);
  best.kernel = def != nullptr ? def->name : "";
  if (best.kind == LayoutKind::kNm) {
    SPARQ_ASSIGN_OR_RETURN(best.nm, PackNm(w, n, k, chosen->format));
    SPARQ_ASSIGN_OR_RETURN(best.nm_panels, PrepackSpmmNmS8(best.nm));
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
    args.panels = &weights.nm_panels;
    return RunSpmmNmS8(args);
  }
  SpmmBsrS8Args args;
  fill(args);
  args.w = &weights.bsr;
  return RunSpmmBsrS8(args);
}

}  // namespace sparq
