#include <gtest/gtest.h>

#include "sparq/onnx_io.h"

namespace sparq {
namespace {

TEST(OnnxIoSmoke, LoadsNodeTestModel) {
  auto m = LoadModel("/usr/share/libonnx-testdata/data/node/test_abs/model.onnx");
  if (!m.ok()) GTEST_SKIP() << m.status().ToString();
  EXPECT_EQ(m->graph.nodes.size(), 1u);
  EXPECT_EQ(m->graph.nodes[0].op_type, "Abs");
  EXPECT_TRUE(CheckModel(*m).ok()) << CheckModel(*m).ToString();
}

}  // namespace
}  // namespace sparq
