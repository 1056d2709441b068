// Numpy-style (multidirectional) broadcasting, as ONNX defines it.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "sparq/status.h"
#include "sparq/tensor.h"

namespace sparq {

// The broadcast shape of `shapes`; InvalidArgument naming both shapes when
// two dimensions differ and neither is 1.
StatusOr<Shape> BroadcastShapes(const std::vector<Shape>& shapes);

// Element strides of a tensor of shape `in` read as if it had shape `out`
// (right-aligned, 0 where `in` is broadcast). Length: out.size().
std::vector<int64_t> BroadcastStrides(const Shape& in, const Shape& out);

// Calls fn(out_index, offsets) for every element of `out`, in order, where
// offsets[k] is the element offset into input k.
template <size_t N, typename Fn>
void ForEachBroadcast(const Shape& out, const std::array<std::vector<int64_t>, N>& strides, Fn&& fn) {
  const int64_t total = NumElements(out);
  if (total == 0) return;
  const size_t rank = out.size();
  std::vector<int64_t> idx(rank, 0);
  std::array<int64_t, N> off{};
  for (int64_t i = 0; i < total; ++i) {
    fn(i, off);
    for (size_t d = rank; d-- > 0;) {  // odometer step with incremental offsets
      if (++idx[d] < out[d]) {
        for (size_t k = 0; k < N; ++k) off[k] += strides[k][d];
        break;
      }
      for (size_t k = 0; k < N; ++k) off[k] -= strides[k][d] * (out[d] - 1);
      idx[d] = 0;
    }
  }
}

}  // namespace sparq
