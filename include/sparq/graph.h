// The in-memory model that sparq's passes read and rewrite.
//
// A Model owns one Graph. Nodes are kept in topological order (Graph::TopoSort
// restores it after a rewrite); values are named strings as in ONNX, with
// weights held in `initializers` (weights found in Constant nodes stay Constant
// nodes, and Graph::FindWeight sees both).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sparq/export.h"
#include "sparq/status.h"
#include "sparq/tensor.h"

namespace sparq {

struct Graph;

// One node attribute. Kinds sparq does not interpret (graphs, sparse tensors,
// type protos) are kept as the serialized AttributeProto in `raw` so that a
// load -> save round trip preserves them. A graph attribute (If's branches,
// Loop's and Scan's body) is also parsed, at load, into `subgraph`: what the
// executor runs. Saving writes `raw`, so passes leave subgraph bodies as
// they were loaded; a subgraph built in memory (raw empty) is written from
// `subgraph`.
struct SPARQ_API Attribute {
  enum class Kind { kFloat, kInt, kString, kTensor, kFloats, kInts, kStrings, kOpaque };
  std::string name;
  Kind kind = Kind::kInt;
  float f = 0.0f;
  int64_t i = 0;
  std::string s;
  Tensor t;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::string raw;  // kOpaque only: serialized onnx.AttributeProto
  std::shared_ptr<const Graph> subgraph;  // kOpaque of type GRAPH: the parsed body; else null
  std::string doc_string;

  // Factories for the common kinds.
  static Attribute Int(std::string name, int64_t v);
  static Attribute Float(std::string name, float v);
  static Attribute String(std::string name, std::string v);
  static Attribute Ints(std::string name, std::vector<int64_t> v);
  static Attribute Floats(std::string name, std::vector<float> v);
  static Attribute FromTensor(std::string name, Tensor v);
};

struct SPARQ_API Node {
  std::string name;
  std::string op_type;
  std::string domain;               // "" is the default ONNX domain
  std::vector<std::string> inputs;  // "" marks an absent optional input
  std::vector<std::string> outputs;
  std::vector<Attribute> attributes;
  std::string doc_string;

  // The attribute named `name`, or nullptr.
  const Attribute* attr(const std::string& name) const;
  Attribute* mutable_attr(const std::string& name);
  // Typed lookups with defaults (the default is returned when the attribute is
  // absent; a present attribute of another kind is also treated as absent).
  int64_t attr_int(const std::string& name, int64_t dflt) const;
  float attr_float(const std::string& name, float dflt) const;
  std::string attr_string(const std::string& name, const std::string& dflt) const;
  std::vector<int64_t> attr_ints(const std::string& name, std::vector<int64_t> dflt = {}) const;
  std::vector<float> attr_floats(const std::string& name, std::vector<float> dflt = {}) const;
  // "'conv1' (Conv)" or "#12 (Conv)" when unnamed; used in messages.
  std::string Describe() const;
  // True when an attribute holds a subgraph (If, Loop, Scan).
  bool HasSubgraphs() const;
  // The values of the enclosing graphs that the node's subgraphs read
  // (OuterScopeReads of each, in attribute order, without repeats): inputs of
  // the node as much as `inputs` are, for ordering, liveness and rewrites.
  std::vector<std::string> ImplicitInputs() const;
};

// One dimension of a value's shape: a number, or a symbol ("batch"), or unknown.
struct SPARQ_API Dim {
  int64_t value = -1;  // >= 0 when known
  std::string param;   // symbolic name, when any
  bool known() const { return value >= 0; }
};

struct SPARQ_API ValueInfo {
  std::string name;
  DataType dtype = DataType::kUndefined;
  int32_t onnx_elem_type = 0;  // kept when dtype is not one sparq stores (e.g. string)
  bool has_shape = false;      // false: rank unknown
  std::vector<Dim> dims;
  std::string doc_string;
  bool is_tensor = true;  // false for sequence/map/optional types (kept opaque)
  std::string raw_type;   // serialized onnx.TypeProto when !is_tensor

  // Shape with -1 for unknown dims.
  Shape StaticShape() const;
  // "float32[batch, 3, 224, 224]".
  std::string Describe() const;
};

struct SPARQ_API Graph {
  std::string name;
  std::string doc_string;
  std::vector<Node> nodes;
  std::vector<ValueInfo> inputs;      // graph inputs (initializers excluded)
  std::vector<ValueInfo> outputs;
  std::vector<ValueInfo> value_info;  // shapes of intermediate values (from shape inference)
  std::map<std::string, Tensor> initializers;
  // Initializers that the file also listed as graph inputs (old exporters do
  // this; the value acts as a default). Kept for a faithful round trip.
  std::vector<ValueInfo> initializer_inputs;

  // Weight tensor named `name`: an initializer or the value of a Constant node;
  // nullptr when it is neither.
  const Tensor* FindWeight(const std::string& name) const;
  // The node producing `value`, or nullptr (graph inputs, initializers).
  const Node* Producer(const std::string& value) const;
  // Shape info of `value` from inputs, outputs or value_info; nullptr if unknown.
  const ValueInfo* FindValueInfo(const std::string& value) const;
  // Reorders nodes topologically (stable for already-sorted graphs), a node
  // with subgraphs after the producers of its ImplicitInputs; fails on a
  // cycle or on an input that nothing produces. `outer_scope`: the graph is
  // a subgraph, and names it does not define are values of an enclosing graph.
  Status TopoSort(bool outer_scope = false);
};

// The values `g` (a subgraph) reads without defining them, the reads of its
// own nested subgraphs included: names of the enclosing graphs' values, in
// order of first use (node inputs, then graph outputs).
SPARQ_API std::vector<std::string> OuterScopeReads(const Graph& g);

struct SPARQ_API OperatorSetId {
  std::string domain;  // "" or "ai.onnx" is the default domain
  int64_t version = 0;
};

struct SPARQ_API Model {
  int64_t ir_version = 8;
  std::vector<OperatorSetId> opset_imports;
  std::string producer_name;
  std::string producer_version;
  std::string domain;
  int64_t model_version = 0;
  std::string doc_string;
  std::vector<std::pair<std::string, std::string>> metadata_props;
  std::vector<std::string> raw_functions;  // serialized onnx.FunctionProto, kept opaque
  Graph graph;

  // Version of the default ONNX domain ("" / "ai.onnx"), 0 if not imported.
  int64_t opset() const;
  // Version imported for `domain`, 0 if not imported.
  int64_t opset(const std::string& domain) const;
};

}  // namespace sparq
