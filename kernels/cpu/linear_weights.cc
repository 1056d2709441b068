#include "kernels/cpu/linear_weights.h"

namespace sparq {

StatusOr<LinearWeights> ReadLinearWeights(const Node& node, const std::vector<const Tensor*>& constants,
                                          const std::string& path) {
  auto decline = [&](const std::string& why) -> Status {
    return Status::NotSupported(node.Describe() + ": " + path + ": " + why);
  };
  const bool gemm = node.op_type == "Gemm";
  const Tensor* b = constants.size() > 1 ? constants[1] : nullptr;
  if (b == nullptr || b->dtype() != DataType::kFloat32 || b->rank() != 2) return decline("B is not a constant 2-D float32");
  bool trans_b = false;
  const Tensor* c = nullptr;
  if (gemm) {
    trans_b = node.attr_int("transB", 0) != 0;
    if (node.attr_int("transA", 0) != 0 || node.attr_float("alpha", 1.0f) != 1.0f) return decline("transA or alpha");
    if (node.inputs.size() > 2 && !node.inputs[2].empty()) {
      c = constants.size() > 2 ? constants[2] : nullptr;
      if (c == nullptr || c->dtype() != DataType::kFloat32 || node.attr_float("beta", 1.0f) != 1.0f)
        return decline("C is not a constant float32 bias with beta 1");
    }
  }
  LinearWeights lw;
  lw.k = trans_b ? b->dim(1) : b->dim(0);
  lw.n = trans_b ? b->dim(0) : b->dim(1);
  if (c != nullptr &&
      !((c->rank() == 1 && c->dim(0) == lw.n) || (c->rank() == 2 && c->dim(0) == 1 && c->dim(1) == lw.n))) {
    return decline("C is not one bias per output");
  }
  lw.w.resize(static_cast<size_t>(lw.n * lw.k));
  const float* src = b->data<float>();
  for (int64_t o = 0; o < lw.n; ++o)
    for (int64_t i = 0; i < lw.k; ++i) lw.w[o * lw.k + i] = trans_b ? src[o * lw.k + i] : src[i * lw.n + o];
  if (c != nullptr) lw.bias.assign(c->data<float>(), c->data<float>() + lw.n);
  return lw;
}

}  // namespace sparq
