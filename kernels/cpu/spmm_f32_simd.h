// The FP32 sparse kernels (see spmm_f32.cc for the tiling), written once over
// a vector type and instantiated by spmm_f32_avx2.cc (8 lanes) and
// spmm_f32_avx512.cc (16 lanes). Include it INSIDE an ISA target region and
// an anonymous namespace: every instantiation is then local to its file.
//
// A vector type provides: Reg, kLanes, kMaxAccumulators, Zero(), Set1(float),
// Load(const float*), Store(float*, Reg), Fma(a, b, c) = a * b + c.
#pragma once

// One block row over the X^T tile, `kRowsPerPass` rows of the block at a time
// so that the accumulators (kRowsPerPass x V) fit in registers.
template <class Vec, int BR, int BC, int V>
void BsrBlockRowSimd(const float* xt, int64_t ld_xt, const int32_t* col_index, const float* values, int64_t blocks,
                     const float* bias, float* out) {
  constexpr int L = Vec::kLanes;
  constexpr int kRowsPerPass = BR < Vec::kMaxAccumulators / V ? BR : Vec::kMaxAccumulators / V;
  static_assert(BR % kRowsPerPass == 0, "block rows must split into equal passes");
  for (int i0 = 0; i0 < BR; i0 += kRowsPerPass) {
    typename Vec::Reg acc[kRowsPerPass][V];
    for (int i = 0; i < kRowsPerPass; ++i)
      for (int v = 0; v < V; ++v) acc[i][v] = bias != nullptr ? Vec::Set1(bias[i0 + i]) : Vec::Zero();
    for (int64_t b = 0; b < blocks; ++b) {
      const float* xb = xt + int64_t{col_index[b]} * BC * ld_xt;
      const float* wb = values + b * (BR * BC) + i0 * BC;
      for (int j = 0; j < BC; ++j) {
        typename Vec::Reg x[V];
        for (int v = 0; v < V; ++v) x[v] = Vec::Load(xb + j * ld_xt + v * L);
        for (int i = 0; i < kRowsPerPass; ++i) {
          const typename Vec::Reg wv = Vec::Set1(wb[i * BC + j]);
          for (int v = 0; v < V; ++v) acc[i][v] = Vec::Fma(wv, x[v], acc[i][v]);
        }
      }
    }
    for (int i = 0; i < kRowsPerPass; ++i)
      for (int v = 0; v < V; ++v) Vec::Store(out + (i0 + i) * (V * L) + v * L, acc[i][v]);
  }
}

template <class Vec, int BR, int BC>
void BsrBlockRowForV(int v, const float* xt, int64_t ld_xt, const int32_t* col_index, const float* values,
                     int64_t blocks, const float* bias, float* out) {
  switch (v) {
    case 4: BsrBlockRowSimd<Vec, BR, BC, 4>(xt, ld_xt, col_index, values, blocks, bias, out); break;
    case 2: BsrBlockRowSimd<Vec, BR, BC, 2>(xt, ld_xt, col_index, values, blocks, bias, out); break;
    default: BsrBlockRowSimd<Vec, BR, BC, 1>(xt, ld_xt, col_index, values, blocks, bias, out); break;
  }
}

// SpmmF32Isa::bsr_block_row for the block shapes of packed_formats.h.
template <class Vec>
void BsrBlockRow(int br, int bc, int v, const float* xt, int64_t ld_xt, const int32_t* col_index,
                 const float* values, int64_t blocks, const float* bias, float* out) {
  if (br == 1 && bc == 4) {
    BsrBlockRowForV<Vec, 1, 4>(v, xt, ld_xt, col_index, values, blocks, bias, out);
  } else if (br == 4 && bc == 1) {
    BsrBlockRowForV<Vec, 4, 1>(v, xt, ld_xt, col_index, values, blocks, bias, out);
  } else if (br == 4 && bc == 4) {
    BsrBlockRowForV<Vec, 4, 4>(v, xt, ld_xt, col_index, values, blocks, bias, out);
  } else if (br == 8 && bc == 8) {
    BsrBlockRowForV<Vec, 8, 8>(v, xt, ld_xt, col_index, values, blocks, bias, out);
  } else {
    BsrBlockRowForV<Vec, 16, 16>(v, xt, ld_xt, col_index, values, blocks, bias, out);
  }
}

// ROWS consecutive rows of an N:M matrix over the X^T tile (group size G, KEEP kept per group).
template <class Vec, int G, int KEEP, int V, int ROWS>
void NmRowsSimd(const float* xt, int64_t ld_xt, const float* values, const uint8_t* indices, int64_t groups,
                int64_t row_stride, const float* bias, float* out) {
  constexpr int L = Vec::kLanes;
  typename Vec::Reg acc[ROWS][V];
  for (int i = 0; i < ROWS; ++i)
    for (int v = 0; v < V; ++v) acc[i][v] = bias != nullptr ? Vec::Set1(bias[i]) : Vec::Zero();
  for (int64_t g = 0; g < groups; ++g) {
    const float* xg = xt + g * G * ld_xt;
    for (int i = 0; i < ROWS; ++i) {
      const float* wv = values + i * row_stride + g * KEEP;
      const uint8_t* ix = indices + i * row_stride + g * KEEP;
      for (int t = 0; t < KEEP; ++t) {
        const typename Vec::Reg w = Vec::Set1(wv[t]);
        const float* xr = xg + int64_t{ix[t]} * ld_xt;
        for (int v = 0; v < V; ++v) acc[i][v] = Vec::Fma(w, Vec::Load(xr + v * L), acc[i][v]);
      }
    }
  }
  for (int i = 0; i < ROWS; ++i)
    for (int v = 0; v < V; ++v) Vec::Store(out + i * (V * L) + v * L, acc[i][v]);
}

template <class Vec, int G, int KEEP, int V>
void NmRowsForRows(int rows, const float* xt, int64_t ld_xt, const float* values, const uint8_t* indices,
                   int64_t groups, int64_t row_stride, const float* bias, float* out) {
  switch (rows) {
    case 4: NmRowsSimd<Vec, G, KEEP, V, 4>(xt, ld_xt, values, indices, groups, row_stride, bias, out); break;
    case 3: NmRowsSimd<Vec, G, KEEP, V, 3>(xt, ld_xt, values, indices, groups, row_stride, bias, out); break;
    case 2: NmRowsSimd<Vec, G, KEEP, V, 2>(xt, ld_xt, values, indices, groups, row_stride, bias, out); break;
    default: NmRowsSimd<Vec, G, KEEP, V, 1>(xt, ld_xt, values, indices, groups, row_stride, bias, out); break;
  }
}

template <class Vec, int G, int KEEP>
void NmRowsForV(int v, int rows, const float* xt, int64_t ld_xt, const float* values, const uint8_t* indices,
                int64_t groups, int64_t row_stride, const float* bias, float* out) {
  switch (v) {
    case 4: NmRowsForRows<Vec, G, KEEP, 4>(rows, xt, ld_xt, values, indices, groups, row_stride, bias, out); break;
    case 2: NmRowsForRows<Vec, G, KEEP, 2>(rows, xt, ld_xt, values, indices, groups, row_stride, bias, out); break;
    default: NmRowsForRows<Vec, G, KEEP, 1>(rows, xt, ld_xt, values, indices, groups, row_stride, bias, out); break;
  }
}

// SpmmF32Isa::nm_rows for 2:4 and 4:8.
template <class Vec>
void NmRows(int group, int keep, int v, const float* xt, int64_t ld_xt, const float* values, const uint8_t* indices,
            int64_t groups, int64_t row_stride, int rows, const float* bias, float* out) {
  if (group == 8 && keep == 4) {
    NmRowsForV<Vec, 8, 4>(v, rows, xt, ld_xt, values, indices, groups, row_stride, bias, out);
  } else {
    NmRowsForV<Vec, 4, 2>(v, rows, xt, ld_xt, values, indices, groups, row_stride, bias, out);
  }
}
