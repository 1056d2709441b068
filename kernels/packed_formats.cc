#include "kernels/packed_formats.h"

#include <algorithm>
#include <limits>
#include <type_traits>

namespace sparq {

namespace {

template <typename T>
bool IsZero(T v) {
  return v == T(0);  // float: +0 and -0 are zero, NaN is not
}

// The element type a C++ value type packs to.
template <typename T>
constexpr ElemType ElemTypeOf();
template <>
constexpr ElemType ElemTypeOf<float>() {
  return ElemType::kF32;
}
template <>
constexpr ElemType ElemTypeOf<int8_t>() {
  return ElemType::kS8;
}

// Shared checks of the packers: the format's kind and element type, sizes, pointer.
template <typename T>
Status CheckPackArgs(const char* what, const T* w, int64_t rows, int64_t cols, PackedFormat format, LayoutKind kind) {
  if (static_cast<int>(format) >= kNumPackedFormats) {
    return Status::InvalidArgument(std::string(what) + ": unknown packed format " +
                                   std::to_string(static_cast<int>(format)));
  }
  const PackedFormatTraits& t = Traits(format);
  if (t.kind != kind) {
    return Status::InvalidArgument(std::string(what) + ": format " + t.name + " is not of this kind");
  }
  if (t.elem != ElemTypeOf<T>()) {
    return Status::InvalidArgument(std::string(what) + ": format " + t.name + " holds " + ElemTypeName(t.elem) +
                                   " values, got " + ElemTypeName(ElemTypeOf<T>()) + " weights");
  }
  if (rows < 0 || cols < 0) {
    return Status::InvalidArgument(std::string(what) + ": negative weight shape [" + std::to_string(rows) + ", " +
                                   std::to_string(cols) + "]");
  }
  if (w == nullptr && rows > 0 && cols > 0) {
    return Status::InvalidArgument(std::string(what) + ": null weights for shape [" + std::to_string(rows) + ", " +
                                   std::to_string(cols) + "]");
  }
  return Status::OK();
}

}  // namespace

const char* ElemTypeName(ElemType type) {
  switch (type) {
    case ElemType::kF32: return "f32";
    case ElemType::kS8: return "s8";
    case ElemType::kS16: return "s16";
  }
  return "?";
}

int ElemTypeBytes(ElemType type) {
  switch (type) {
    case ElemType::kF32: return 4;
    case ElemType::kS8: return 1;
    case ElemType::kS16: return 2;
  }
  return 0;
}

StatusOr<PackedFormat> PackedFormatByName(std::string_view name) {
  std::string known;
  for (const PackedFormatTraits& t : kPackedFormatTraits) {
    if (name == t.name) return t.format;
    known += known.empty() ? "" : ", ";
    known += t.name;
  }
  return Status::NotFound("unknown packed format '" + std::string(name) + "' (known: " + known + ")");
}

StatusOr<PackedFormat> BsrFormat(int block_rows, int block_cols, ElemType elem) {
  for (const PackedFormatTraits& t : kPackedFormatTraits) {
    if (t.kind == LayoutKind::kBsr && t.block_rows == block_rows && t.block_cols == block_cols && t.elem == elem)
      return t.format;
  }
  return Status::NotSupported("no BSR format with " + std::to_string(block_rows) + "x" + std::to_string(block_cols) +
                              " blocks of " + ElemTypeName(elem) +
                              " (supported blocks: 1x4, 4x1, 4x4, 8x8, 16x16 of f32 and s8)");
}

// ---------------------------------------------------------------------------
// BSR

template <typename T>
StatusOr<BsrMatrix<T>> PackBsr(const T* w, int64_t rows, int64_t cols, PackedFormat format) {
  SPARQ_RETURN_IF_ERROR(CheckPackArgs("PackBsr", w, rows, cols, format, LayoutKind::kBsr));
  const PackedFormatTraits& t = Traits(format);
  BsrMatrix<T> m;
  m.format = format;
  m.rows = rows;
  m.cols = cols;
  m.block_rows = t.block_rows;
  m.block_cols = t.block_cols;
  const int64_t brows = m.block_row_count();
  const int64_t bcols = m.block_col_count();
  if (bcols > std::numeric_limits<int32_t>::max()) {
    return Status::InvalidArgument("PackBsr: " + std::to_string(bcols) + " block columns exceed the int32 index");
  }
  const int br = m.block_rows, bc = m.block_cols;
  m.row_ptr.assign(brows + 1, 0);
  if (std::is_same<T, int8_t>::value) m.row_sums.assign(rows, 0);
  int64_t nonzeros = 0;
  for (int64_t r = 0; r < brows; ++r) {
    const int64_t i_end = std::min<int64_t>(br, rows - r * br);
    for (int64_t c = 0; c < bcols; ++c) {
      const int64_t j_end = std::min<int64_t>(bc, cols - c * bc);
      int64_t block_nonzeros = 0;
      for (int64_t i = 0; i < i_end; ++i) {
        const T* src = w + (r * br + i) * cols + c * bc;
        for (int64_t j = 0; j < j_end; ++j) block_nonzeros += IsZero(src[j]) ? 0 : 1;
      }
      if (block_nonzeros == 0) continue;
      nonzeros += block_nonzeros;
      m.col_index.push_back(static_cast<int32_t>(c));
      const size_t base = m.values.size();
      m.values.resize(base + static_cast<size_t>(br) * bc, T(0));
      for (int64_t i = 0; i < i_end; ++i) {
        const T* src = w + (r * br + i) * cols + c * bc;
        T* dst = m.values.data() + base + i * bc;
        for (int64_t j = 0; j < j_end; ++j) {
          dst[j] = src[j];
          if (!m.row_sums.empty()) m.row_sums[r * br + i] += static_cast<int32_t>(src[j]);
        }
      }
    }
    m.row_ptr[r + 1] = m.stored_blocks();
  }
  m.stats.elements = rows * cols;
  m.stats.nonzeros = nonzeros;
  m.stats.blocks = brows * bcols;
  m.stats.stored_blocks = m.stored_blocks();
  m.stats.stored_values = static_cast<int64_t>(m.values.size());
  m.stats.packed_bytes = static_cast<int64_t>(m.values.size() * sizeof(T) + m.col_index.size() * sizeof(int32_t) +
                                              m.row_ptr.size() * sizeof(int64_t));
  return m;
}

template <typename T>
std::vector<T> UnpackBsr(const BsrMatrix<T>& m) {
  std::vector<T> dense(static_cast<size_t>(m.rows * m.cols), T(0));
  const int br = m.block_rows, bc = m.block_cols;
  for (int64_t r = 0; r + 1 < static_cast<int64_t>(m.row_ptr.size()); ++r) {
    for (int64_t b = m.row_ptr[r]; b < m.row_ptr[r + 1]; ++b) {
      const int64_t c = m.col_index[b];
      const T* block = m.values.data() + b * m.block_size();
      for (int64_t i = 0; i < br && r * br + i < m.rows; ++i)
        for (int64_t j = 0; j < bc && c * bc + j < m.cols; ++j)
          dense[(r * br + i) * m.cols + c * bc + j] = block[i * bc + j];
    }
  }
  return dense;
}

// ---------------------------------------------------------------------------
// N:M

template <typename T>
StatusOr<NmMatrix<T>> PackNm(const T* w, int64_t rows, int64_t cols, PackedFormat format) {
  SPARQ_RETURN_IF_ERROR(CheckPackArgs("PackNm", w, rows, cols, format, LayoutKind::kNm));
  const PackedFormatTraits& t = Traits(format);
  NmMatrix<T> m;
  m.format = format;
  m.rows = rows;
  m.cols = cols;
  m.group_size = t.block_cols;
  m.keep = t.nm_keep;
  m.groups_per_row = (cols + m.group_size - 1) / m.group_size;
  const int64_t slots = rows * m.groups_per_row * m.keep;
  m.values.assign(slots, T(0));
  m.indices.assign(slots, 0);
  if (std::is_same<T, int8_t>::value) m.row_sums.assign(rows, 0);
  int64_t nonzeros = 0;
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t g = 0; g < m.groups_per_row; ++g) {
      const int64_t k0 = g * m.group_size;
      const int width = static_cast<int>(std::min<int64_t>(m.group_size, cols - k0));
      const T* src = w + n * cols + k0;
      int count = 0;
      for (int j = 0; j < width; ++j) count += IsZero(src[j]) ? 0 : 1;
      if (count > m.keep) {
        return Status::InvalidArgument("PackNm: weights are not " + std::to_string(m.keep) + ":" +
                                       std::to_string(m.group_size) + " sparse: row " + std::to_string(n) +
                                       ", columns " + std::to_string(k0) + ".." + std::to_string(k0 + width - 1) +
                                       " hold " + std::to_string(count) + " nonzeros (at most " +
                                       std::to_string(m.keep) + " allowed)");
      }
      nonzeros += count;
      // Positions to store: every nonzero, then the lowest zero positions, then
      // position 0 again if the group is narrower than `keep`; kept in order.
      bool chosen[16] = {};
      int chosen_count = count;
      for (int j = 0; j < width; ++j) chosen[j] = !IsZero(src[j]);
      for (int j = 0; j < width && chosen_count < m.keep; ++j) {
        if (!chosen[j]) {
          chosen[j] = true;
          ++chosen_count;
        }
      }
      const int64_t slot = (n * m.groups_per_row + g) * m.keep;
      int s = 0;
      for (int repeat = chosen_count; repeat < m.keep; ++repeat) m.indices[slot + s++] = 0;  // zero values
      for (int j = 0; j < width; ++j) {
        if (!chosen[j]) continue;
        m.indices[slot + s] = static_cast<uint8_t>(j);
        m.values[slot + s] = src[j];
        ++s;
        if (!m.row_sums.empty()) m.row_sums[n] += static_cast<int32_t>(src[j]);
      }
    }
  }
  m.stats.elements = rows * cols;
  m.stats.nonzeros = nonzeros;
  m.stats.blocks = rows * m.groups_per_row;
  m.stats.stored_blocks = m.stats.blocks;
  m.stats.stored_values = slots;
  m.stats.packed_bytes = static_cast<int64_t>(slots * (sizeof(T) + sizeof(uint8_t)));
  return m;
}

template <typename T>
std::vector<T> UnpackNm(const NmMatrix<T>& m) {
  std::vector<T> dense(static_cast<size_t>(m.rows * m.cols), T(0));
  for (int64_t n = 0; n < m.rows; ++n) {
    for (int64_t g = 0; g < m.groups_per_row; ++g) {
      const int64_t slot = (n * m.groups_per_row + g) * m.keep;
      for (int s = 0; s < m.keep; ++s) {
        const int64_t k = g * m.group_size + m.indices[slot + s];
        if (!IsZero(m.values[slot + s])) dense[n * m.cols + k] = m.values[slot + s];
      }
    }
  }
  return dense;
}

// ---------------------------------------------------------------------------
// INT8 GEMM panels

template <typename TW>
StatusOr<PackedGemmS8> PackGemmS8(const TW* w, int64_t n, int64_t k, GemmZeroPoints w_zp, PackedFormat format) {
  static_assert(std::is_same<TW, int8_t>::value || std::is_same<TW, uint8_t>::value, "int8 or uint8 weights");
  if (static_cast<int>(format) >= kNumPackedFormats || Traits(format).kind != LayoutKind::kPanel) {
    return Status::InvalidArgument("PackGemmS8: not a panel format (use panel16x4_s8 or panel16x2_s16)");
  }
  if (n < 0 || k < 0) {
    return Status::InvalidArgument("PackGemmS8: negative weight shape [" + std::to_string(n) + ", " +
                                   std::to_string(k) + "]");
  }
  if (w == nullptr && n > 0 && k > 0) return Status::InvalidArgument("PackGemmS8: null weights");
  constexpr int32_t kLo = std::numeric_limits<TW>::min(), kHi = std::numeric_limits<TW>::max();
  for (int64_t c = 0; c < (w_zp.per_channel ? n : 1); ++c) {
    const int32_t zp = w_zp.at(c);
    if (zp < kLo || zp > kHi) {
      return Status::InvalidArgument("PackGemmS8: weight zero point " + std::to_string(zp) + " of channel " +
                                     std::to_string(c) + " is outside [" + std::to_string(kLo) + ", " +
                                     std::to_string(kHi) + "]");
    }
  }
  PackedGemmS8 p;
  p.format = format;
  p.n = n;
  p.k = k;
  const int step = p.step();
  constexpr int kW = PackedGemmS8::kPanelWidth;
  p.k_padded = (k + step - 1) / step * step;
  p.panels = (n + kW - 1) / kW;
  p.weights_unsigned = std::is_same<TW, uint8_t>::value;
  const int64_t slots = p.panels * kW * p.k_padded;
  // Offset of W[col][kk] inside the panel data: panel, step, column in panel, k in step.
  auto offset = [&](int64_t col, int64_t kk) {
    return ((col / kW) * (p.k_padded / step) + kk / step) * (kW * step) + (col % kW) * step + kk % step;
  };
  if (format == PackedFormat::kPanel16x4S8) {
    const int32_t shift = p.weights_unsigned ? 128 : 0;
    p.data_s8.assign(slots, 0);
    p.col_zero_points.assign(p.panels * kW, 0);
    p.col_sums.assign(p.panels * kW, 0);
    for (int64_t col = 0; col < n; ++col) {
      const int32_t zb_s = w_zp.at(col) - shift;
      p.col_zero_points[col] = zb_s;
      p.has_zero_points = p.has_zero_points || zb_s != 0;
      int32_t sum = 0;
      for (int64_t kk = 0; kk < k; ++kk) {
        const int32_t b_s = static_cast<int32_t>(w[col * k + kk]) - shift;
        p.data_s8[offset(col, kk)] = static_cast<int8_t>(b_s);
        sum += b_s - zb_s;  // |sum| <= 255 * k: no overflow below k = 2^23
      }
      p.col_sums[col] = sum;
    }
  } else {
    p.data_s16.assign(slots, 0);
    for (int64_t col = 0; col < n; ++col) {
      const int32_t zb = w_zp.at(col);
      for (int64_t kk = 0; kk < k; ++kk)
        p.data_s16[offset(col, kk)] = static_cast<int16_t>(static_cast<int32_t>(w[col * k + kk]) - zb);
    }
  }
  return p;
}

// ---------------------------------------------------------------------------
// FP32 GEMM panels

StatusOr<PackedGemmF32> PackGemmF32(const float* w, int64_t rows, int64_t k, PackedFormat format, bool strips) {
  if (static_cast<int>(format) >= kNumPackedFormats || Traits(format).kind != LayoutKind::kPanel ||
      Traits(format).elem != ElemType::kF32) {
    return Status::InvalidArgument("PackGemmF32: not an f32 panel format (use panel8x32_f32, panel6x16_f32 or "
                                   "panel4x8_f32)");
  }
  if (rows < 0 || k < 0) {
    return Status::InvalidArgument("PackGemmF32: negative weight shape [" + std::to_string(rows) + ", " +
                                   std::to_string(k) + "]");
  }
  if (w == nullptr && rows > 0 && k > 0) return Status::InvalidArgument("PackGemmF32: null weights");
  PackedGemmF32 p;
  p.format = format;
  p.rows = rows;
  p.k = k;
  p.strips = strips;
  const int tr = p.height();
  p.panels = (rows + tr - 1) / tr;
  p.data.assign(static_cast<size_t>(p.panels * tr * k), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    float* panel = p.data.data() + (r / tr) * k * tr + r % tr;
    for (int64_t kk = 0; kk < k; ++kk) panel[kk * tr] = w[r * k + kk];
  }
  return p;
}

template StatusOr<BsrMatrix<float>> PackBsr<float>(const float*, int64_t, int64_t, PackedFormat);
template StatusOr<BsrMatrix<int8_t>> PackBsr<int8_t>(const int8_t*, int64_t, int64_t, PackedFormat);
template std::vector<float> UnpackBsr<float>(const BsrMatrix<float>&);
template std::vector<int8_t> UnpackBsr<int8_t>(const BsrMatrix<int8_t>&);
template StatusOr<NmMatrix<float>> PackNm<float>(const float*, int64_t, int64_t, PackedFormat);
template StatusOr<NmMatrix<int8_t>> PackNm<int8_t>(const int8_t*, int64_t, int64_t, PackedFormat);
template std::vector<float> UnpackNm<float>(const NmMatrix<float>&);
template std::vector<int8_t> UnpackNm<int8_t>(const NmMatrix<int8_t>&);
template StatusOr<PackedGemmS8> PackGemmS8<int8_t>(const int8_t*, int64_t, int64_t, GemmZeroPoints, PackedFormat);
template StatusOr<PackedGemmS8> PackGemmS8<uint8_t>(const uint8_t*, int64_t, int64_t, GemmZeroPoints, PackedFormat);

}  // namespace sparq
