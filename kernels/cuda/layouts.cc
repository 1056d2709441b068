#include "kernels/cuda/layouts.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace sparq {
namespace cuda {
namespace {

template <typename T>
bool IsZero(T v) {
  return v == T(0);
}
// float16 bits: +0 and -0.
template <>
bool IsZero<uint16_t>(uint16_t v) {
  return (v & 0x7fffu) == 0;
}

Status CheckSizes(int64_t rows, int64_t cols, int64_t ld, int64_t block_size) {
  if (block_size < 1) return Status::InvalidArgument("block size " + std::to_string(block_size) + " is below 1");
  if (rows < 1 || cols < 1) {
    return Status::InvalidArgument("matrix of " + std::to_string(rows) + " x " + std::to_string(cols) +
                                   " has no elements");
  }
  if (ld < cols) {
    return Status::InvalidArgument("leading dimension " + std::to_string(ld) + " is below the " +
                                   std::to_string(cols) + " columns");
  }
  return Status::OK();
}

// True when block (br, bc) of `dense` holds a nonzero (padding counts as zero).
template <typename T>
bool BlockIsNonzero(const T* dense, int64_t rows, int64_t cols, int64_t ld, int64_t b, int64_t br, int64_t bc) {
  for (int64_t r = br * b; r < (br + 1) * b && r < rows; ++r) {
    for (int64_t c = bc * b; c < (bc + 1) * b && c < cols; ++c) {
      if (!IsZero(dense[r * ld + c])) return true;
    }
  }
  return false;
}

// Copies block (br, bc) of `dense` (zeros past its edges) into `dst`, whose rows are `dst_ld` apart.
template <typename T>
void CopyBlock(const T* dense, int64_t rows, int64_t cols, int64_t ld, int64_t b, int64_t br, int64_t bc, T* dst,
               int64_t dst_ld) {
  for (int64_t i = 0; i < b; ++i) {
    for (int64_t j = 0; j < b; ++j) {
      const int64_t r = br * b + i, c = bc * b + j;
      dst[i * dst_ld + j] = r < rows && c < cols ? dense[r * ld + c] : T(0);
    }
  }
}

}  // namespace

template <typename T>
int64_t BlockedEll<T>::nonzero_blocks() const {
  int64_t n = 0;
  for (int32_t c : col_ind) n += c >= 0 ? 1 : 0;
  return n;
}

template <typename T>
StatusOr<BlockedEll<T>> DenseToBlockedEll(const T* dense, int64_t rows, int64_t cols, int64_t ld, int64_t block_size) {
  SPARQ_RETURN_IF_ERROR(CheckSizes(rows, cols, ld, block_size));
  const int64_t b = block_size;
  BlockedEll<T> ell;
  ell.rows = rows;
  ell.cols = cols;
  ell.padded_rows = RoundUp(rows, b);
  ell.padded_cols = RoundUp(cols, b);
  ell.block_size = b;
  const int64_t block_rows = ell.padded_rows / b, block_cols = ell.padded_cols / b;
  std::vector<std::vector<int32_t>> kept(static_cast<size_t>(block_rows));
  size_t slots = 1;  // cuSPARSE wants ell_cols > 0
  for (int64_t br = 0; br < block_rows; ++br) {
    for (int64_t bc = 0; bc < block_cols; ++bc) {
      if (BlockIsNonzero(dense, rows, cols, ld, b, br, bc)) kept[br].push_back(static_cast<int32_t>(bc));
    }
    slots = std::max(slots, kept[br].size());
  }
  ell.ell_cols = static_cast<int64_t>(slots) * b;
  ell.col_ind.assign(static_cast<size_t>(block_rows) * slots, -1);
  ell.values.assign(static_cast<size_t>(ell.padded_rows * ell.ell_cols), T(0));
  for (int64_t br = 0; br < block_rows; ++br) {
    for (size_t s = 0; s < kept[br].size(); ++s) {
      const int32_t bc = kept[br][s];
      ell.col_ind[static_cast<size_t>(br) * slots + s] = bc;
      T* dst = ell.values.data() + br * b * ell.ell_cols + static_cast<int64_t>(s) * b;
      CopyBlock(dense, rows, cols, ld, b, br, bc, dst, ell.ell_cols);
    }
  }
  return ell;
}

template <typename T>
std::vector<T> BlockedEllToDense(const BlockedEll<T>& ell) {
  std::vector<T> dense(static_cast<size_t>(ell.rows * ell.cols), T(0));
  const int64_t b = ell.block_size, slots = ell.slots();
  for (int64_t br = 0; br < ell.block_rows(); ++br) {
    for (int64_t s = 0; s < slots; ++s) {
      const int32_t bc = ell.col_ind[static_cast<size_t>(br * slots + s)];
      if (bc < 0) continue;
      for (int64_t i = 0; i < b; ++i) {
        for (int64_t j = 0; j < b; ++j) {
          const int64_t r = br * b + i, c = bc * b + j;
          if (r < ell.rows && c < ell.cols) dense[r * ell.cols + c] = ell.values[(br * b + i) * ell.ell_cols + s * b + j];
        }
      }
    }
  }
  return dense;
}

template <typename T>
StatusOr<Bsr<T>> DenseToBsr(const T* dense, int64_t rows, int64_t cols, int64_t ld, int64_t block_size) {
  SPARQ_RETURN_IF_ERROR(CheckSizes(rows, cols, ld, block_size));
  const int64_t b = block_size;
  Bsr<T> bsr;
  bsr.rows = rows;
  bsr.cols = cols;
  bsr.padded_rows = RoundUp(rows, b);
  bsr.padded_cols = RoundUp(cols, b);
  bsr.block_size = b;
  const int64_t block_rows = bsr.padded_rows / b, block_cols = bsr.padded_cols / b;
  bsr.row_ptr.assign(static_cast<size_t>(block_rows + 1), 0);
  for (int64_t br = 0; br < block_rows; ++br) {
    for (int64_t bc = 0; bc < block_cols; ++bc) {
      if (!BlockIsNonzero(dense, rows, cols, ld, b, br, bc)) continue;
      bsr.col_ind.push_back(static_cast<int32_t>(bc));
      const size_t at = bsr.values.size();
      bsr.values.resize(at + static_cast<size_t>(b * b));
      CopyBlock(dense, rows, cols, ld, b, br, bc, bsr.values.data() + at, b);
    }
    bsr.row_ptr[static_cast<size_t>(br + 1)] = static_cast<int32_t>(bsr.col_ind.size());
  }
  return bsr;
}

template <typename T>
std::vector<T> BsrToDense(const Bsr<T>& bsr) {
  std::vector<T> dense(static_cast<size_t>(bsr.rows * bsr.cols), T(0));
  const int64_t b = bsr.block_size;
  for (int64_t br = 0; br + 1 < static_cast<int64_t>(bsr.row_ptr.size()); ++br) {
    for (int32_t k = bsr.row_ptr[br]; k < bsr.row_ptr[br + 1]; ++k) {
      const int64_t bc = bsr.col_ind[k];
      for (int64_t i = 0; i < b; ++i) {
        for (int64_t j = 0; j < b; ++j) {
          const int64_t r = br * b + i, c = bc * b + j;
          if (r < bsr.rows && c < bsr.cols) dense[r * bsr.cols + c] = bsr.values[(k * b + i) * b + j];
        }
      }
    }
  }
  return dense;
}

namespace {
template <typename T>
double AsDouble(T v) {
  return static_cast<double>(v);
}
// float16 bits to double (normal, subnormal, inf, NaN).
template <>
double AsDouble<uint16_t>(uint16_t h) {
  const int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, frac = h & 0x3ff;
  double v;
  if (exp == 0) v = std::ldexp(static_cast<double>(frac), -24);
  else if (exp == 31) v = frac != 0 ? std::nan("") : HUGE_VAL;
  else v = std::ldexp(static_cast<double>(frac | 0x400), exp - 25);
  return sign ? -v : v;
}
}  // namespace

template <typename T>
std::vector<double> BlockedEllMatMulHost(const BlockedEll<T>& a, const T* b, int64_t n) {
  std::vector<double> c(static_cast<size_t>(a.rows * n), 0.0);
  const int64_t bs = a.block_size, slots = a.slots();
  for (int64_t r = 0; r < a.rows; ++r) {
    const int64_t br = r / bs;
    for (int64_t s = 0; s < slots; ++s) {
      const int32_t bc = a.col_ind[static_cast<size_t>(br * slots + s)];
      if (bc < 0) continue;
      for (int64_t j = 0; j < bs; ++j) {
        const int64_t k = bc * bs + j;
        if (k >= a.cols) break;
        const double w = AsDouble(a.values[r * a.ell_cols + s * bs + j]);
        for (int64_t col = 0; col < n; ++col) c[r * n + col] += w * AsDouble(b[k * n + col]);
      }
    }
  }
  return c;
}

template <typename T>
double BlockSparsity(const T* dense, int64_t rows, int64_t cols, int64_t ld, int64_t block_size) {
  if (!CheckSizes(rows, cols, ld, block_size).ok()) return 0.0;
  const int64_t block_rows = RoundUp(rows, block_size) / block_size, block_cols = RoundUp(cols, block_size) / block_size;
  int64_t zero = 0;
  for (int64_t br = 0; br < block_rows; ++br) {
    for (int64_t bc = 0; bc < block_cols; ++bc) zero += BlockIsNonzero(dense, rows, cols, ld, block_size, br, bc) ? 0 : 1;
  }
  return static_cast<double>(zero) / static_cast<double>(block_rows * block_cols);
}

template <typename T>
std::vector<T> ToColumnMajor(const T* row_major, int64_t rows, int64_t cols) {
  std::vector<T> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = row_major[r * cols + c];
  }
  return out;
}

template <typename T>
std::vector<T> PadMatrix(const T* src, int64_t rows, int64_t cols, int64_t padded_rows, int64_t padded_cols) {
  std::vector<T> out(static_cast<size_t>(padded_rows * padded_cols), T(0));
  for (int64_t r = 0; r < rows && r < padded_rows; ++r) {
    for (int64_t c = 0; c < cols && c < padded_cols; ++c) out[r * padded_cols + c] = src[r * cols + c];
  }
  return out;
}

#define SPARQ_LAYOUT_INSTANCES(T)                                                                                    \
  template struct BlockedEll<T>;                                                                                     \
  template StatusOr<BlockedEll<T>> DenseToBlockedEll<T>(const T*, int64_t, int64_t, int64_t, int64_t);               \
  template std::vector<T> BlockedEllToDense<T>(const BlockedEll<T>&);                                                \
  template StatusOr<Bsr<T>> DenseToBsr<T>(const T*, int64_t, int64_t, int64_t, int64_t);                             \
  template std::vector<T> BsrToDense<T>(const Bsr<T>&);                                                              \
  template std::vector<double> BlockedEllMatMulHost<T>(const BlockedEll<T>&, const T*, int64_t);                     \
  template double BlockSparsity<T>(const T*, int64_t, int64_t, int64_t, int64_t);                                    \
  template std::vector<T> ToColumnMajor<T>(const T*, int64_t, int64_t);                                              \
  template std::vector<T> PadMatrix<T>(const T*, int64_t, int64_t, int64_t, int64_t);
SPARQ_LAYOUT_INSTANCES(float)
SPARQ_LAYOUT_INSTANCES(int8_t)
SPARQ_LAYOUT_INSTANCES(uint16_t)
SPARQ_LAYOUT_INSTANCES(int32_t)
#undef SPARQ_LAYOUT_INSTANCES

}  // namespace cuda
}  // namespace sparq
