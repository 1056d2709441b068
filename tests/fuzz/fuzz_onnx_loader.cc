// libFuzzer target: the ONNX loader (LoadModelFromBytes) and what reads a
// loaded model: serialization, topological sort and the model summary of
// `sparq inspect`. Loaded tensors must have shapes that match their sizes.
//
// The first byte chooses whether ONNX shape inference runs (bit 0); the rest
// is the ModelProto. External data resolves against an empty folder.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "sparq/inspect.h"
#include "sparq/onnx_io.h"

namespace {

const std::string& EmptyFolder() {
  static const std::string dir = [] {
    auto path = std::filesystem::temp_directory_path() / "sparq-fuzz-empty";
    std::filesystem::create_directories(path);
    return path.string();
  }();
  return dir;
}

// A loaded tensor's element count must be the product of its dims, with no
// overflow: kernels index by shape, so a mismatch means out-of-bounds reads.
void CheckShape(const sparq::Tensor& t) {
  unsigned __int128 n = 1;
  for (int64_t d : t.shape()) {
    if (d < 0) __builtin_trap();
    n *= static_cast<uint64_t>(d);
    if (n > (static_cast<unsigned __int128>(1) << 63)) __builtin_trap();
  }
  if (n != static_cast<unsigned __int128>(t.numel())) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  sparq::LoadOptions options;
  options.infer_shapes = (data[0] & 1) != 0;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto model = sparq::LoadModelFromBytes(bytes, EmptyFolder(), options);
  if (!model.ok()) return 0;
  for (const auto& [name, t] : model->graph.initializers) CheckShape(t);
  for (const auto& node : model->graph.nodes)
    for (const auto& a : node.attributes)
      if (a.kind == sparq::Attribute::Kind::kTensor && a.t.defined()) CheckShape(a.t);
  sparq::ModelSummary summary = sparq::SummarizeModel(*model);
  (void)summary.ToText();
  (void)summary.ToJson();
  auto serialized = sparq::SerializeModel(*model);
  if (serialized.ok()) {
    // What sparq writes, sparq reads back.
    if (!sparq::LoadModelFromBytes(*serialized, EmptyFolder(), {false}).ok()) __builtin_trap();
  }
  sparq::Graph graph = model->graph;
  (void)graph.TopoSort();
  return 0;
}
