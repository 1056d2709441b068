// Checks that hold in every build type: Tensor::FromVector with the wrong
// number of values, StatusOr::value() of an error, and Tensor::View over the
// caller's memory (with its lifetime rules).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "sparq/executor.h"
#include "sparq/tensor.h"
#include "test_util.h"

namespace sparq {
namespace {

TEST(TensorSafety, FromVectorWithWrongCountIsUndefinedInEveryBuild) {
  // Regression: in Release this used to write 4 floats into a 2-float buffer.
  Tensor t = Tensor::FromVector<float>({2}, {1.0f, 2.0f, 3.0f, 4.0f});
  EXPECT_FALSE(t.defined());
  EXPECT_EQ(t.raw_data(), nullptr);
  EXPECT_EQ(t.numel(), 0);
  EXPECT_FALSE(Tensor::FromVector<int64_t>({2, 3}, {1, 2, 3}).defined());
  EXPECT_FALSE(Tensor::FromVector<bool>({3}, {true}).defined());
  EXPECT_FALSE(Tensor::FromVector<float>({-1}, {}).defined());
  Tensor ok = Tensor::FromVector<float>({2, 2}, {1.0f, 2.0f, 3.0f, 4.0f});
  ASSERT_TRUE(ok.defined());
  EXPECT_EQ(ok.data<float>()[3], 4.0f);
  EXPECT_TRUE(Tensor::FromVector<float>({0, 3}, {}).defined());
}

TEST(TensorSafety, ExecutorRejectsAnUndefinedInputByName) {
  Model m;
  m.opset_imports = {{"", 17}};
  m.graph.inputs.push_back(testing::FloatInput("x", {{2, ""}}));
  m.graph.outputs.push_back(testing::FloatInput("y", {{2, ""}}));
  m.graph.nodes.push_back({"relu", "Relu", "", {"x"}, {"y"}, {}, ""});
  auto exec = Executor::Create(m);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  TensorMap out;
  Status st = (*exec)->Run({{"x", Tensor::FromVector<float>({2}, {1.0f, 2.0f, 3.0f})}}, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("input 'x' is an undefined tensor"), std::string::npos) << st.ToString();
}

StatusOr<std::vector<int>> Fails() { return Status::NotFound("no such thing"); }
StatusOr<std::unique_ptr<int>> FailsPtr() { return Status::NotFound("no such pointer"); }

TEST(StatusOrSafety, ValueOfAnErrorIsDefinedInRelease) {
  // Debug builds assert (a bug in the caller); Release builds print the error
  // and hand back a value-initialized T instead of reading an empty optional.
  StatusOr<std::vector<int>> v = Fails();
  ASSERT_FALSE(v.ok());
  EXPECT_DEBUG_DEATH(
      {
        ::testing::internal::CaptureStderr();
        EXPECT_TRUE(v.value().empty());
        const auto& cv = v;
        EXPECT_TRUE(cv->empty());
        EXPECT_TRUE(std::move(v).value().empty());
        EXPECT_EQ(FailsPtr().value(), nullptr);
        std::string err = ::testing::internal::GetCapturedStderr();
        EXPECT_NE(err.find("StatusOr::value() called on an error: NotFound: no such thing"), std::string::npos) << err;
      },
      "called on an error");
  EXPECT_EQ(v.status().code(), StatusCode::kNotFound);  // the error stays
}

TEST(TensorView, ReadsAndAliasesCallerMemory) {
  std::vector<float> buf = {-1.0f, 0.5f, 2.0f, -3.0f};
  auto view = Tensor::View(DataType::kFloat32, {2, 2}, buf.data());
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  EXPECT_EQ(view->raw_data(), buf.data());  // no copy
  EXPECT_EQ(view->numel(), 4);
  buf[1] = 7.0f;
  EXPECT_EQ(view->data<float>()[1], 7.0f);
  Tensor copy = view->Clone();  // a private copy owns its own buffer
  EXPECT_NE(copy.raw_data(), buf.data());
  EXPECT_TRUE(copy.Equals(*view));

  // Runs through the executor like any tensor.
  Model m;
  m.opset_imports = {{"", 17}};
  m.graph.inputs.push_back(testing::FloatInput("x", {{2, ""}, {2, ""}}));
  m.graph.outputs.push_back(testing::FloatInput("y", {{2, ""}, {2, ""}}));
  m.graph.nodes.push_back({"relu", "Relu", "", {"x"}, {"y"}, {}, ""});
  auto exec = Executor::Create(m);
  ASSERT_TRUE(exec.ok());
  TensorMap out;
  ASSERT_TRUE((*exec)->Run({{"x", *view}}, &out).ok());
  EXPECT_EQ(out.at("y").data<float>()[0], 0.0f);
  EXPECT_EQ(out.at("y").data<float>()[1], 7.0f);
  EXPECT_EQ(buf[0], -1.0f);  // inputs are never written
}

TEST(TensorView, OwnerKeepsTheMemoryAlive) {
  Tensor view;
  std::weak_ptr<std::vector<int32_t>> watch;
  {
    auto owned = std::make_shared<std::vector<int32_t>>(std::vector<int32_t>{1, 2, 3});
    watch = owned;
    auto v = Tensor::View(DataType::kInt32, {3}, owned->data(), owned);
    ASSERT_TRUE(v.ok());
    view = *v;
  }
  ASSERT_FALSE(watch.expired());  // the view holds the owner
  EXPECT_EQ(view.data<int32_t>()[2], 3);
  view = Tensor();
  EXPECT_TRUE(watch.expired());  // and lets it go with its last copy
}

TEST(TensorView, RejectsBadArguments) {
  std::vector<float> buf(4);
  EXPECT_EQ(Tensor::View(DataType::kFloat32, {4}, nullptr).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Tensor::View(DataType::kFloat32, {0}, nullptr).ok());  // no elements, no memory needed
  EXPECT_FALSE(Tensor::View(DataType::kFloat32, {-2}, buf.data()).ok());
  EXPECT_FALSE(Tensor::View(DataType::kUndefined, {4}, buf.data()).ok());
  auto misaligned = Tensor::View(DataType::kFloat32, {2}, reinterpret_cast<char*>(buf.data()) + 1);
  ASSERT_FALSE(misaligned.ok());
  EXPECT_NE(misaligned.status().message().find("aligned"), std::string::npos) << misaligned.status().ToString();
}

}  // namespace
}  // namespace sparq
