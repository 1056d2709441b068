// What the QLinearConv rows (quant_conv.cc: GEMM and sparse kernels;
// quant_conv_depthwise.cc) read from a node whose inputs but x are constants:
// the 2-D geometry, the quantization parameters and the bias, checked once
// for both. Group and weight-shape conditions stay with each row.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparq/graph.h"
#include "sparq/status.h"
#include "sparq/tensor.h"

namespace sparq {

struct QuantConvParams {
  int64_t m = 0, c = 0, kh = 0, kw = 0;  // W [M, C, kh, kw]; a 1-D W [M, C, k]: kh = k, kw = 1
  bool one_d = false;  // 1-D: x [N, C, L] and y [N, M, Lo] run as [N, C, L, 1] and [N, M, Lo, 1]
  int64_t stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  int64_t pad_t = 0, pad_l = 0, pad_b = 0, pad_r = 0;
  DataType x_type = DataType::kUndefined, y_type = DataType::kUndefined;
  int32_t x_zp = 0, y_zp = 0;
  std::vector<float> multiplier;  // [M]: RequantMultiplier(x_scale, w_scale[o], y_scale)
  std::vector<int32_t> bias;      // [M], or empty without B
  // sparq.QLinearConvLut: the output is table[y - min(y_type)], of out_type.
  std::vector<uint8_t> table;  // 256 bytes, or empty
  DataType out_type = DataType::kUndefined;
};

bool IsByteType(DataType type);  // uint8 or int8

// Reads a QLinearConv (with `lut`: a sparq.QLinearConvLut, its table input 9)
// whose inputs 1..8 are constants: int8 W of rank 4 (or 3: a 1-D convolution,
// read as 2-D of width 1, `one_d`), explicit 2-D pads
// (auto_pad NOTSET), strides and dilations >= 1, float32 x/y scales and byte
// zero points of one value each, w_scale and int8 w_zero_point of one value
// or one per output channel, B int32 per output channel. NotSupported
// "<node>: <path>: <why>" otherwise.
StatusOr<QuantConvParams> ReadQuantConvParams(const Node& node, const std::vector<const Tensor*>& constants,
                                              const std::string& path, bool lut);

}  // namespace sparq
