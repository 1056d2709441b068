// Builds a one-node model with sparq's public API, saves, reloads and runs it.
#include <cstdio>
#include <string>

#include "sparq/executor.h"
#include "sparq/onnx_io.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer OUT_DIR\n");
    return 2;
  }
  sparq::Model m;
  m.opset_imports = {{"", 17}};
  sparq::ValueInfo x;
  x.name = "x";
  x.dtype = sparq::DataType::kFloat32;
  x.has_shape = true;
  x.dims = {sparq::Dim{3, ""}};
  sparq::ValueInfo y = x;
  y.name = "y";
  m.graph.inputs = {x};
  m.graph.outputs = {y};
  m.graph.nodes.push_back({"relu", "Relu", "", {"x"}, {"y"}, {}, ""});
  std::string path = std::string(argv[1]) + "/relu.onnx";
  sparq::Status st = sparq::SaveModel(m, path);
  if (!st.ok()) return std::fprintf(stderr, "%s\n", st.ToString().c_str()), 1;
  auto loaded = sparq::LoadModel(path);
  if (!loaded.ok()) return std::fprintf(stderr, "%s\n", loaded.status().ToString().c_str()), 1;
  auto exec = sparq::Executor::Create(*loaded);
  if (!exec.ok()) return std::fprintf(stderr, "%s\n", exec.status().ToString().c_str()), 1;
  sparq::TensorMap out;
  st = (*exec)->Run({{"x", sparq::Tensor::FromVector<float>({3}, {-1.0f, 0.5f, 2.0f})}}, &out);
  if (!st.ok()) return std::fprintf(stderr, "%s\n", st.ToString().c_str()), 1;
  const float* v = out["y"].data<float>();
  std::printf("relu: %g %g %g\n", v[0], v[1], v[2]);
  return (v[0] == 0.0f && v[1] == 0.5f && v[2] == 2.0f) ? 0 : 1;
}
