// Pruning structures, element and group scores, and the mask of each
// structure at a target sparsity (one layer, or a global ranking).
//
// Block tiling of a [rows, cols] GEMM view with RxC blocks (partial blocks at
// the right and bottom edges are blocks too, pruned as a whole):
//
//        <-- C --><-- C --><- c' ->
//      ^ ┌───────┬───────┬──────┐
//      R │  b0   │  b1   │  b2  │   c' = cols % C
//      v ├───────┼───────┼──────┤
//     r' │  b3   │  b4   │  b5  │   r' = rows % R
//        └───────┴───────┴──────┘
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "prune/internal.h"

namespace sparq {

using prune_internal::GroupScore;

// ---------------------------------------------------------------------------
// PruneMask

int64_t PruneMask::pruned() const {
  int64_t z = 0;
  for (uint8_t k : keep) z += k == 0;
  return z;
}

double PruneMask::sparsity() const {
  return keep.empty() ? 0.0 : static_cast<double>(pruned()) / static_cast<double>(keep.size());
}

PruneMask PruneMask::FromNonZeros(const Matrix& w) {
  PruneMask m;
  m.rows = w.rows;
  m.cols = w.cols;
  m.keep.resize(w.values.size());
  for (size_t i = 0; i < w.values.size(); ++i) m.keep[i] = w.values[i] != 0.0f;
  return m;
}

Status ApplyMask(const PruneMask& mask, Matrix* weights) {
  if (mask.rows != weights->rows || mask.cols != weights->cols || mask.keep.size() != weights->values.size()) {
    return Status::InvalidArgument("mask is " + std::to_string(mask.rows) + "x" + std::to_string(mask.cols) +
                                   " but the weight matrix is " + std::to_string(weights->rows) + "x" +
                                   std::to_string(weights->cols));
  }
  for (size_t i = 0; i < mask.keep.size(); ++i)
    if (!mask.keep[i]) weights->values[i] = 0.0f;
  return Status::OK();
}

// ---------------------------------------------------------------------------
// PruneStructure

PruneStructure PruneStructure::Block(int rows, int cols) {
  PruneStructure s;
  s.kind = Kind::kBlock;
  s.block_rows = rows;
  s.block_cols = cols;
  return s;
}

PruneStructure PruneStructure::NM(int n, int m) {
  PruneStructure s;
  s.kind = Kind::kNM;
  s.n = n;
  s.m = m;
  return s;
}

PruneStructure PruneStructure::Channel() {
  PruneStructure s;
  s.kind = Kind::kChannel;
  return s;
}

PruneStructure PruneStructure::Auto() {
  PruneStructure s;
  s.kind = Kind::kAuto;
  return s;
}

std::string PruneStructure::ToString() const {
  switch (kind) {
    case Kind::kUnstructured: return "unstructured";
    case Kind::kBlock: return "block" + std::to_string(block_rows) + "x" + std::to_string(block_cols);
    case Kind::kNM: return std::to_string(n) + ":" + std::to_string(m);
    case Kind::kChannel: return "channel";
    case Kind::kAuto: return "auto";
  }
  return "?";
}

double PruneStructure::FixedSparsity() const {
  return kind == Kind::kNM && m > 0 ? 1.0 - static_cast<double>(n) / static_cast<double>(m) : -1.0;
}

bool PruneStructure::operator==(const PruneStructure& o) const {
  if (kind != o.kind) return false;
  if (kind == Kind::kBlock) return block_rows == o.block_rows && block_cols == o.block_cols;
  if (kind == Kind::kNM) return n == o.n && m == o.m;
  return true;
}

namespace {

constexpr const char* kStructureSpellings =
    "expected unstructured, block<R>x<C> (e.g. block4x4, block1x4), <N>:<M> (e.g. 2:4, 4:8), channel or auto";

// A positive decimal integer of at most 6 digits; -1 otherwise.
int ParseSize(const std::string& s) {
  if (s.empty() || s.size() > 6) return -1;
  for (char c : s)
    if (c < '0' || c > '9') return -1;
  return std::stoi(s);
}

Status BadStructure(const std::string& text, const std::string& why) {
  return Status::InvalidArgument("'" + text + "' is not valid: " + why);
}

}  // namespace

StatusOr<PruneStructure> PruneStructure::Parse(const std::string& text) {
  if (text == "unstructured") return Unstructured();
  if (text == "channel") return Channel();
  if (text == "auto") return Auto();
  if (text.rfind("block", 0) == 0) {
    const std::string dims = text.substr(5);
    const size_t x = dims.find('x');
    if (x == std::string::npos) return BadStructure(text, "a block is written block<R>x<C>, e.g. block4x4");
    const int r = ParseSize(dims.substr(0, x)), c = ParseSize(dims.substr(x + 1));
    if (r < 0 || c < 0) return BadStructure(text, "block sizes must be whole numbers, e.g. block4x4");
    if (r == 0 || c == 0) return BadStructure(text, "block sizes must be positive (at least 1x1)");
    return Block(r, c);
  }
  const size_t colon = text.find(':');
  if (colon != std::string::npos) {
    const int n = ParseSize(text.substr(0, colon)), m = ParseSize(text.substr(colon + 1));
    if (n < 0 || m < 0) return BadStructure(text, "N:M takes two whole numbers, e.g. 2:4");
    if (n == 0 || m == 0) return BadStructure(text, "in N:M, N and M must be positive");
    if (n >= m) {
      return BadStructure(text, "in N:M, N (weights kept) must be less than M (group size), e.g. 2:4");
    }
    return NM(n, m);
  }
  return Status::InvalidArgument("'" + text + "' is not a structure: " + kStructureSpellings);
}

// ---------------------------------------------------------------------------
// Scores

const char* PruneScoreName(PruneScore s) {
  switch (s) {
    case PruneScore::kMagnitude: return "magnitude";
    case PruneScore::kL1: return "l1";
    case PruneScore::kL2: return "l2";
    case PruneScore::kActivation: return "activation";
  }
  return "?";
}

StatusOr<PruneScore> ParsePruneScore(const std::string& name) {
  if (name == "magnitude") return PruneScore::kMagnitude;
  if (name == "l1") return PruneScore::kL1;
  if (name == "l2") return PruneScore::kL2;
  if (name == "activation") return PruneScore::kActivation;
  return Status::InvalidArgument("unknown pruning score '" + name + "' (expected magnitude, l1, l2 or activation)");
}

StatusOr<Matrix> ElementScores(const Matrix& weights, PruneScore score, const std::vector<double>& column_norms) {
  if (weights.values.size() != static_cast<size_t>(weights.rows * weights.cols)) {
    return Status::InvalidArgument("weight matrix holds " + std::to_string(weights.values.size()) +
                                   " values, expected " + std::to_string(weights.rows) + "x" +
                                   std::to_string(weights.cols));
  }
  Matrix s(weights.rows, weights.cols);
  for (size_t i = 0; i < s.values.size(); ++i) s.values[i] = std::fabs(weights.values[i]);
  if (score != PruneScore::kActivation) return s;

  const int64_t cols = weights.cols;
  const int64_t n = static_cast<int64_t>(column_norms.size());
  if (cols == 0 || n == 0 || n % cols != 0 || weights.rows % (n / cols) != 0) {
    return Status::InvalidArgument("activation scores need one input norm per weight column (" +
                                   std::to_string(cols) + ", or a multiple for grouped Conv), got " +
                                   std::to_string(n));
  }
  for (double v : column_norms) {
    if (!(v >= 0.0) || !std::isfinite(v)) {
      return Status::InvalidArgument("activation norm " + std::to_string(v) + " is negative or not finite");
    }
  }
  const int64_t groups = n / cols, rows_per_group = weights.rows / groups;
  for (int64_t r = 0; r < weights.rows; ++r) {
    const double* norm = column_norms.data() + (r / rows_per_group) * cols;
    for (int64_t c = 0; c < cols; ++c) s.at(r, c) = static_cast<float>(s.at(r, c) * norm[c]);
  }
  return s;
}

namespace prune_internal {

namespace {

// Pooled score of the rectangle [r0, r1) x [c0, c1).
double PoolRect(const Matrix& s, int64_t r0, int64_t r1, int64_t c0, int64_t c1, PruneScore pooling) {
  double acc = 0.0;
  for (int64_t r = r0; r < r1; ++r) {
    const float* row = s.values.data() + r * s.cols;
    for (int64_t c = c0; c < c1; ++c) acc += pooling == PruneScore::kL2 ? double(row[c]) * row[c] : double(row[c]);
  }
  const double n = static_cast<double>((r1 - r0) * (c1 - c0));
  if (n == 0) return 0.0;
  return pooling == PruneScore::kL2 ? std::sqrt(acc / n) : acc / n;
}

}  // namespace

std::vector<GroupScore> PooledGroupScores(const PruneStructure& structure, const Matrix& scores, PruneScore pooling) {
  std::vector<GroupScore> out;
  if (structure.kind == PruneStructure::Kind::kBlock) {
    const int64_t R = structure.block_rows, C = structure.block_cols;
    for (int64_t r0 = 0; r0 < scores.rows; r0 += R) {
      for (int64_t c0 = 0; c0 < scores.cols; c0 += C) {
        const int64_t r1 = std::min(scores.rows, r0 + R), c1 = std::min(scores.cols, c0 + C);
        out.push_back({PoolRect(scores, r0, r1, c0, c1, pooling), (r1 - r0) * (c1 - c0)});
      }
    }
    return out;
  }
  out.reserve(scores.values.size());
  for (float v : scores.values) out.push_back({static_cast<double>(v), 1});
  return out;
}

double PooledRowScore(const Matrix& scores, int64_t row, PruneScore pooling) {
  return PoolRect(scores, row, row + 1, 0, scores.cols, pooling);
}

}  // namespace prune_internal

namespace {

// Indices of `groups` in ascending score order, ties by index.
std::vector<int64_t> AscendingOrder(const std::vector<GroupScore>& groups) {
  std::vector<int64_t> order(groups.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return groups[a].score < groups[b].score; });
  return order;
}

// Chooses groups lowest score first: a group is taken when it brings the
// pruned element count closer to `target`. Returns the chosen flags.
std::vector<uint8_t> ChooseClosest(const std::vector<GroupScore>& groups, double target) {
  std::vector<uint8_t> chosen(groups.size(), 0);
  double pruned = 0.0;
  for (int64_t g : AscendingOrder(groups)) {
    const double size = static_cast<double>(groups[g].size);
    if (std::fabs(pruned + size - target) < std::fabs(pruned - target)) {
      chosen[g] = 1;
      pruned += size;
    }
  }
  return chosen;
}

StatusOr<PruneMask> NMMask(const PruneStructure& st, const Matrix& scores, double sparsity) {
  const double fixed = st.FixedSparsity();
  if (sparsity > fixed + 1e-9) {
    return Status::InvalidArgument("sparsity " + prune_internal::FormatNumber(sparsity) + " is above " +
                                   prune_internal::FormatNumber(fixed) + ", the most that " + st.ToString() +
                                   " allows (1 - N/M)");
  }
  PruneMask mask{scores.rows, scores.cols, std::vector<uint8_t>(scores.values.size(), 1)};
  // Candidates: in each group, every element but the `keep` highest.
  std::vector<int64_t> candidates;
  std::vector<int64_t> idx;
  for (int64_t r = 0; r < scores.rows; ++r) {
    for (int64_t c0 = 0; c0 < scores.cols; c0 += st.m) {
      const int64_t len = std::min<int64_t>(st.m, scores.cols - c0);
      const int64_t keep = std::min<int64_t>(st.n, len);
      idx.resize(static_cast<size_t>(len));
      std::iota(idx.begin(), idx.end(), r * scores.cols + c0);
      std::stable_sort(idx.begin(), idx.end(),
                       [&](int64_t a, int64_t b) { return scores.values[a] < scores.values[b]; });
      candidates.insert(candidates.end(), idx.begin(), idx.begin() + (len - keep));
    }
  }
  int64_t count = static_cast<int64_t>(candidates.size());
  if (sparsity < fixed - 1e-9) {
    count = std::min<int64_t>(count, std::llround(sparsity * static_cast<double>(scores.values.size())));
    std::stable_sort(candidates.begin(), candidates.end(),
                     [&](int64_t a, int64_t b) { return scores.values[a] < scores.values[b]; });
  }
  for (int64_t i = 0; i < count; ++i) mask.keep[static_cast<size_t>(candidates[i])] = 0;
  return mask;
}

}  // namespace

StatusOr<PruneMask> ComputeMask(const PruneStructure& structure, const Matrix& scores, double sparsity,
                                PruneScore pooling) {
  if (!(sparsity >= 0.0 && sparsity < 1.0)) {
    return Status::InvalidArgument("sparsity " + prune_internal::FormatNumber(sparsity) +
                                   " is out of range: must be in [0, 1)");
  }
  if (scores.rows < 0 || scores.cols < 0 || scores.values.size() != static_cast<size_t>(scores.rows * scores.cols)) {
    return Status::InvalidArgument("score matrix holds " + std::to_string(scores.values.size()) +
                                   " values, expected " + std::to_string(scores.rows) + "x" +
                                   std::to_string(scores.cols));
  }
  const double total = static_cast<double>(scores.values.size());
  PruneMask mask{scores.rows, scores.cols, std::vector<uint8_t>(scores.values.size(), 1)};
  switch (structure.kind) {
    case PruneStructure::Kind::kAuto:
      return Status::InvalidArgument("structure 'auto' is resolved per layer (PlanPruning); a mask needs a "
                                     "concrete structure");
    case PruneStructure::Kind::kNM:
      if (structure.n < 1 || structure.n >= structure.m) {
        return Status::InvalidArgument("invalid N:M structure " + structure.ToString() + ": need 1 <= N < M");
      }
      return NMMask(structure, scores, sparsity);
    case PruneStructure::Kind::kChannel: {
      std::vector<GroupScore> rows(static_cast<size_t>(scores.rows));
      for (int64_t r = 0; r < scores.rows; ++r) rows[r] = {prune_internal::PooledRowScore(scores, r, pooling), 1};
      const std::vector<int64_t> order = AscendingOrder(rows);
      const int64_t k = std::llround(sparsity * static_cast<double>(scores.rows));
      for (int64_t i = 0; i < k; ++i)
        std::fill_n(mask.keep.begin() + order[i] * scores.cols, scores.cols, uint8_t{0});
      return mask;
    }
    case PruneStructure::Kind::kUnstructured: {
      std::vector<int64_t> order(scores.values.size());
      std::iota(order.begin(), order.end(), 0);
      const int64_t k = std::llround(sparsity * total);
      auto less = [&](int64_t a, int64_t b) {
        return scores.values[a] < scores.values[b] || (scores.values[a] == scores.values[b] && a < b);
      };
      std::nth_element(order.begin(), order.begin() + k, order.end(), less);
      for (int64_t i = 0; i < k; ++i) mask.keep[static_cast<size_t>(order[i])] = 0;
      return mask;
    }
    case PruneStructure::Kind::kBlock: {
      if (structure.block_rows < 1 || structure.block_cols < 1) {
        return Status::InvalidArgument("invalid block structure " + structure.ToString() + ": sizes must be >= 1");
      }
      const std::vector<GroupScore> groups = prune_internal::PooledGroupScores(structure, scores, pooling);
      const std::vector<uint8_t> chosen = ChooseClosest(groups, sparsity * total);
      const int64_t R = structure.block_rows, C = structure.block_cols;
      const int64_t blocks_per_row = (scores.cols + C - 1) / C;
      for (size_t g = 0; g < groups.size(); ++g) {
        if (!chosen[g]) continue;
        const int64_t r0 = static_cast<int64_t>(g) / blocks_per_row * R;
        const int64_t c0 = static_cast<int64_t>(g) % blocks_per_row * C;
        for (int64_t r = r0; r < std::min(scores.rows, r0 + R); ++r)
          for (int64_t c = c0; c < std::min(scores.cols, c0 + C); ++c) mask.keep[r * scores.cols + c] = 0;
      }
      return mask;
    }
  }
  return Status::Internal("unhandled structure kind");
}

namespace prune_internal {

std::vector<double> GlobalSparsities(const std::vector<const Matrix*>& scores,
                                     const std::vector<PruneStructure>& structures, double target,
                                     double max_layer_sparsity, PruneScore pooling) {
  struct Entry {
    double score;
    int64_t size;
    size_t layer;
  };
  std::vector<Entry> all;
  std::vector<double> layer_total(scores.size(), 0.0);
  double total = 0.0;
  for (size_t l = 0; l < scores.size(); ++l) {
    std::vector<GroupScore> groups = PooledGroupScores(structures[l], *scores[l], pooling);
    // Normalize by the layer's mean element-weighted group score.
    double sum = 0.0, n = 0.0;
    for (const auto& g : groups) {
      sum += g.score * static_cast<double>(g.size);
      n += static_cast<double>(g.size);
    }
    const double mean = n > 0 ? sum / n : 0.0;
    for (const auto& g : groups) all.push_back({mean > 0 ? g.score / mean : 0.0, g.size, l});
    layer_total[l] = n;
    total += n;
  }
  std::stable_sort(all.begin(), all.end(), [](const Entry& a, const Entry& b) { return a.score < b.score; });
  std::vector<double> pruned(scores.size(), 0.0);
  const double goal = target * total;
  double done = 0.0;
  for (const Entry& e : all) {
    const double size = static_cast<double>(e.size);
    if (pruned[e.layer] + size > max_layer_sparsity * layer_total[e.layer]) continue;
    if (std::fabs(done + size - goal) < std::fabs(done - goal)) {
      pruned[e.layer] += size;
      done += size;
    }
  }
  std::vector<double> out(scores.size(), 0.0);
  for (size_t l = 0; l < scores.size(); ++l) out[l] = layer_total[l] > 0 ? pruned[l] / layer_total[l] : 0.0;
  return out;
}

std::string FormatNumber(double v, int precision) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
  return buf;
}

}  // namespace prune_internal
}  // namespace sparq
