// Batches of the bundled digits data for executor tests: `count` batches of
// `batch` samples, each different (samples wrap around the file).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sparq/executor.h"
#include "sparq/npy.h"

namespace sparq {
namespace testing {

inline const std::string& DigitsDir() {
  static const std::string dir = std::string(SPARQ_SOURCE_DIR) + "/examples/digits/";
  return dir;
}

inline std::vector<TensorMap> DigitsBatches(const Model& model, int count, int64_t batch) {
  auto npz = ReadNpz(DigitsDir() + "eval.npz");
  EXPECT_TRUE(npz.ok()) << npz.status().ToString();
  std::vector<TensorMap> out;
  if (!npz.ok()) return out;
  const Tensor& all = npz->front().second;
  const int64_t per_sample = all.numel() / all.dim(0);
  for (int b = 0; b < count; ++b) {
    Shape shape = all.shape();
    shape[0] = batch;
    Tensor t(DataType::kFloat32, shape);
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<float>()[i] = all.data<float>()[(b * batch * per_sample + i) % all.numel()];
    out.push_back({{model.graph.inputs.front().name, t}});
  }
  return out;
}

}  // namespace testing
}  // namespace sparq
