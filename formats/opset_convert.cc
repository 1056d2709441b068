// ConvertOpset: ONNX's version converter on sparq's Model (through the proto).
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <algorithm>
#include <exception>
#include <set>
#include <string>

#include "sparq/onnx_io.h"

namespace sparq {
namespace {

// The values whose rank shape inference (or the model) knows.
std::set<std::string> ValuesOfKnownRank(const onnx::GraphProto& g) {
  std::set<std::string> known;
  for (const auto* list : {&g.input(), &g.value_info(), &g.output()})
    for (const auto& v : *list)
      if (v.type().has_tensor_type() && v.type().tensor_type().has_shape()) known.insert(v.name());
  for (const auto& t : g.initializer()) known.insert(t.name());
  return known;
}

// Before opset 13, Softmax, LogSoftmax and Hardmax coerce their input to 2-D
// at `axis`; from 13 they work along `axis` alone. ONNX's 12 -> 13 adapter
// (libonnx 1.12) needs the input's shape to restore the old semantics and
// fails when shape inference cannot tell it (a Reshape to a computed shape, as
// in PP-OCR's attention). Such a node is rewritten first into the form the
// adapter leaves alone, computing the same values at any opset:
//
//   x ─ Softmax(axis=a) ─ y    =>    x ─ Flatten(axis=a) ─ Softmax(axis=1) ─ Reshape ─ y
//                                    └─ Shape ──────────────────────────────────┘
//
// The Flatten output gets a rank-2 value_info so the adapter sees axis 1 as
// the last one. Returns the number of nodes rewritten.
int CoerceSoftmaxOfUnknownRank(onnx::ModelProto& m) {
  onnx::GraphProto* g = m.mutable_graph();
  const std::set<std::string> known = ValuesOfKnownRank(*g);
  std::set<std::string> names;
  for (const auto& n : g->node())
    for (const auto& o : n.output()) names.insert(o);
  for (const auto& v : g->input()) names.insert(v.name());
  auto fresh = [&](const std::string& base) {
    std::string name = base;
    for (int k = 1; names.count(name); ++k) name = base + "_" + std::to_string(k);
    names.insert(name);
    return name;
  };
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  int rewritten = 0;
  for (const onnx::NodeProto& n : g->node()) {
    const bool coercing = (n.domain().empty() || n.domain() == "ai.onnx") &&
                          (n.op_type() == "Softmax" || n.op_type() == "LogSoftmax" || n.op_type() == "Hardmax");
    if (!coercing || n.input_size() != 1 || n.output_size() != 1 || known.count(n.input(0))) {
      *nodes.Add() = n;
      continue;
    }
    int64_t axis = 1;
    for (const auto& a : n.attribute())
      if (a.name() == "axis") axis = a.i();
    const std::string& x = n.input(0);
    const std::string shape = fresh(n.output(0) + "_input_shape");
    const std::string flat = fresh(n.output(0) + "_coerced");
    const std::string soft = fresh(n.output(0) + "_2d");

    onnx::NodeProto* s = nodes.Add();
    s->set_name(fresh(n.name() + "_input_shape"));
    s->set_op_type("Shape");
    s->add_input(x);
    s->add_output(shape);

    onnx::NodeProto* f = nodes.Add();
    f->set_name(fresh(n.name() + "_coerce"));
    f->set_op_type("Flatten");
    f->add_input(x);
    f->add_output(flat);
    onnx::AttributeProto* fa = f->add_attribute();
    fa->set_name("axis");
    fa->set_type(onnx::AttributeProto::INT);
    fa->set_i(axis);

    onnx::NodeProto* sm = nodes.Add();
    *sm = n;
    sm->clear_attribute();
    for (const auto& a : n.attribute())
      if (a.name() != "axis") *sm->add_attribute() = a;
    onnx::AttributeProto* sa = sm->add_attribute();
    sa->set_name("axis");
    sa->set_type(onnx::AttributeProto::INT);
    sa->set_i(1);
    sm->set_input(0, flat);
    sm->set_output(0, soft);

    onnx::NodeProto* r = nodes.Add();
    r->set_name(fresh(n.name() + "_restore"));
    r->set_op_type("Reshape");
    r->add_input(soft);
    r->add_input(shape);
    r->add_output(n.output(0));

    onnx::ValueInfoProto* vi = g->add_value_info();
    vi->set_name(flat);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim();
    tt->mutable_shape()->add_dim();
    ++rewritten;
  }
  if (rewritten > 0) *g->mutable_node() = std::move(nodes);
  return rewritten;
}

}  // namespace

// Weights of at least this many bytes go to the converter as graph inputs of
// their type and shape, not as data: adapters read the values of small
// constants only (Reshape shapes, Resize scales), so a model over 2 GB converts
// without one protobuf of its weights, and the result shares them with the input.
constexpr size_t kConvertWithoutDataBytes = size_t{1} << 20;

StatusOr<Model> ConvertOpset(const Model& model, int64_t target) {
  const int64_t from = model.opset();
  if (from == target) return model;
  Model light = model;  // shares the tensors
  std::set<std::string> held;
  {
    std::set<std::string> listed;  // initializers that are graph inputs already stay as they are
    for (const ValueInfo& v : model.graph.initializer_inputs) listed.insert(v.name);
    for (const auto& [name, t] : model.graph.initializers) {
      if (t.nbytes() < kConvertWithoutDataBytes || listed.count(name) || t.dtype() == DataType::kInt64 ||
          t.dtype() == DataType::kInt32) {
        continue;
      }
      ValueInfo v;
      v.name = name;
      v.dtype = t.dtype();
      v.has_shape = true;
      for (int64_t d : t.shape()) v.dims.push_back(Dim{d, ""});
      light.graph.inputs.push_back(std::move(v));
      light.graph.initializers.erase(name);
      held.insert(name);
    }
  }
  SPARQ_ASSIGN_OR_RETURN(std::string bytes, SerializeModel(light));
  light = Model();
  onnx::ModelProto in;
  if (!in.ParseFromString(bytes)) return Status::Internal("opset conversion: cannot re-read the serialized model");
  // Adapters read the shapes of the values they touch: infer them first (as
  // onnx.version_converter does in Python); the result keeps only the model's
  // own value_info.
  const auto own_value_info = in.graph().value_info();
  try {
    onnx::shape_inference::InferShapes(in);
  } catch (const std::exception&) {
    // Best effort: a model shape inference rejects may still convert.
  }
  if (from < 13 && target >= 13) CoerceSoftmaxOfUnknownRank(in);
  std::string converted;
  try {
    onnx::ModelProto out = onnx::version_conversion::ConvertVersion(in, static_cast<int>(target));
    *out.mutable_graph()->mutable_value_info() = own_value_info;
    if (!out.SerializeToString(&converted)) return Status::Internal("opset conversion: cannot serialize the result");
  } catch (const std::exception& e) {
    return Status::InvalidArgument("ONNX version converter, opset " + std::to_string(from) + " -> " +
                                   std::to_string(target) + ": " + e.what());
  }
  auto result = LoadModelFromBytes(converted);
  if (!result.ok()) return result.status().WithContext("opset conversion " + std::to_string(from) + " -> " + std::to_string(target));
  // The held weights become initializers again, in place of the inputs that stood for them.
  std::vector<ValueInfo>& inputs = result->graph.inputs;
  inputs.erase(std::remove_if(inputs.begin(), inputs.end(), [&](const ValueInfo& v) { return held.count(v.name) > 0; }),
               inputs.end());
  for (const std::string& name : held) result->graph.initializers[name] = model.graph.initializers.at(name);
  return result;
}

}  // namespace sparq
