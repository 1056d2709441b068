// Host-side conversions of a dense weight matrix into the block-sparse
// layouts of cuSPARSE, and the small packing helpers of cuBLASLt. Plain C++
// (no CUDA headers), so tests/kernels/cuda_layouts_test.cc checks them on any
// machine against a dense matmul.
//
// Blocked-ELL (cusparseCreateBlockedEll), a matrix of rows x cols in square
// blocks of b x b, every block-row holding the same number of block slots
// (the most any block-row needs; ell_cols = slots * b value columns):
//
//   dense (b = 2, 4 x 6)          col_ind [rows/b][slots]   values [rows][ell_cols]
//   | A A . . B B |               block-row 0: 0  2         | A A B B |
//   | A A . . B B |               block-row 1: 1 -1         | A A B B |
//   | . . C C . . |                (-1: an empty slot,       | C C 0 0 |
//   | . . C C . . |                 its values are zero)     | C C 0 0 |
//
// Block columns are listed in increasing order in each block-row; values are
// row-major with the b columns of slot s at [s * b, (s + 1) * b). A block is
// kept when any of its elements is nonzero (a -0.0 is zero). rows and cols
// are padded up to multiples of b with zeros (padded_rows / padded_cols);
// the caller pads the dense operand B (its rows) to padded_cols the same way.
//
// BSR (cusparseXbsrmm / cusparseSpMM with CUSPARSE_FORMAT_BSR, block
// direction row-major): row_ptr[block_rows + 1], col_ind[nnzb] and nnzb
// blocks of b x b values, each block row-major.
#pragma once

#include <cstdint>
#include <vector>

#include "sparq/status.h"

namespace sparq {
namespace cuda {

// v rounded up to a multiple of m (m > 0).
inline int64_t RoundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

template <typename T>
struct BlockedEll {
  int64_t rows = 0, cols = 0;                // of the dense matrix
  int64_t padded_rows = 0, padded_cols = 0;  // multiples of block_size
  int64_t block_size = 0;
  int64_t ell_cols = 0;         // value columns: slots * block_size (>= block_size, see DenseToBlockedEll)
  std::vector<int32_t> col_ind;  // [padded_rows / b][ell_cols / b], block column or -1
  std::vector<T> values;         // [padded_rows][ell_cols], row-major

  int64_t block_rows() const { return block_size > 0 ? padded_rows / block_size : 0; }
  int64_t slots() const { return block_size > 0 ? ell_cols / block_size : 0; }
  // Blocks holding a nonzero (slots that are not -1).
  int64_t nonzero_blocks() const;
};

// Blocked-ELL of the dense row-major matrix `dense` (rows x cols, leading
// dimension ld >= cols) in blocks of block_size. A matrix with no nonzero
// block still gets one (empty) slot per block-row, since cuSPARSE wants
// ell_cols > 0. T: float, int8_t, uint16_t (float16 bits), int32_t.
// Errors: InvalidArgument for a block size < 1, negative or empty sizes, or ld < cols.
template <typename T>
StatusOr<BlockedEll<T>> DenseToBlockedEll(const T* dense, int64_t rows, int64_t cols, int64_t ld, int64_t block_size);

// The dense rows x cols matrix (row-major) a Blocked-ELL stands for.
template <typename T>
std::vector<T> BlockedEllToDense(const BlockedEll<T>& ell);

template <typename T>
struct Bsr {
  int64_t rows = 0, cols = 0;
  int64_t padded_rows = 0, padded_cols = 0;
  int64_t block_size = 0;
  std::vector<int32_t> row_ptr;  // [padded_rows / b + 1]
  std::vector<int32_t> col_ind;  // [nnzb]
  std::vector<T> values;         // [nnzb][b][b], each block row-major

  int64_t nnzb() const { return static_cast<int64_t>(col_ind.size()); }
};

// BSR of a dense row-major matrix; the same rules and errors as DenseToBlockedEll.
template <typename T>
StatusOr<Bsr<T>> DenseToBsr(const T* dense, int64_t rows, int64_t cols, int64_t ld, int64_t block_size);

template <typename T>
std::vector<T> BsrToDense(const Bsr<T>& bsr);

// C[rows x n] = A * B for a Blocked-ELL A and a dense row-major B [cols x n],
// in double: the host's statement of what the cuSPARSE SpMM computes, for tests.
template <typename T>
std::vector<double> BlockedEllMatMulHost(const BlockedEll<T>& a, const T* b, int64_t n);

// The fraction of b x b blocks (of the padded matrix) that are all zero.
template <typename T>
double BlockSparsity(const T* dense, int64_t rows, int64_t cols, int64_t ld, int64_t block_size);

// A row-major rows x cols matrix copied column-major (out[c * rows + r]),
// what cuSPARSE's INT8 Blocked-ELL SpMM wants for B and C.
template <typename T>
std::vector<T> ToColumnMajor(const T* row_major, int64_t rows, int64_t cols);

// A row-major rows x cols matrix copied into a zeroed padded_rows x
// padded_cols one (each at least as large).
template <typename T>
std::vector<T> PadMatrix(const T* src, int64_t rows, int64_t cols, int64_t padded_rows, int64_t padded_cols);

}  // namespace cuda
}  // namespace sparq
