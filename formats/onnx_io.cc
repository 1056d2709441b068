// ONNX protobuf <-> sparq::Model.
//
// The conversion is lossless for what sparq understands and opaque-but-kept for
// the rest (subgraph attributes, non-tensor value types, local functions), so
// load -> save gives back an equivalent file.
#include "sparq/onnx_io.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <memory>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "sparq/file_io.h"

namespace sparq {
namespace fs = std::filesystem;

namespace {

// ---------------------------------------------------------------------------
// Tensors

template <typename Src, typename Dst>
void CopyConvert(const Src* src, Dst* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<Dst>(src[i]);
}

// 4-bit types: one element per byte in memory, two per byte in files (low
// nibble first; an odd count leaves the last high nibble zero), ONNX's rule for
// raw_data, int32_data (one packed byte per entry) and external data.
bool IsPacked4Bit(DataType t) { return t == DataType::kInt4 || t == DataType::kUInt4; }

// Bytes `n` elements of `t` take in a file.
int64_t FileBytes(DataType t, int64_t n) {
  return IsPacked4Bit(t) ? (n + 1) / 2 : n * static_cast<int64_t>(DataTypeSize(t));
}

std::string PackNibbles(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.raw_data());
  const int64_t n = t.numel();
  std::string out(static_cast<size_t>((n + 1) / 2), '\0');
  for (int64_t i = 0; i < n; ++i) {
    out[i / 2] = static_cast<char>(static_cast<uint8_t>(out[i / 2]) | ((p[i] & 0xf) << (4 * (i & 1))));
  }
  return out;
}

// Byte `i / 2`'s nibble of `packed` for element i, sign-extended for int4.
void UnpackNibbles(const uint8_t* packed, int64_t n, Tensor& t) {
  auto* dst = static_cast<uint8_t*>(t.raw_data());
  const bool is_signed = t.dtype() == DataType::kInt4;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t v = (packed[i / 2] >> (4 * (i & 1))) & 0xf;
    dst[i] = is_signed ? static_cast<uint8_t>(static_cast<int8_t>((v ^ 8) - 8)) : v;
  }
}

// Where a tensor's external data lives, checked against the file before
// anything is allocated.
struct ExternalRef {
  fs::path file;
  int64_t offset = 0;
};

StatusOr<ExternalRef> LocateExternalData(const onnx::TensorProto& proto, const std::string& base_dir,
                                         int64_t need, const Shape& shape) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : proto.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = std::atoll(kv.value().c_str());
    else if (kv.key() == "length") length = std::atoll(kv.value().c_str());
  }
  const std::string where = "tensor '" + proto.name() + "'";
  if (location.empty()) return Status::Corruption(where + ": external data without a location");
  if (fs::path(location).is_absolute() || location.find("..") != std::string::npos) {
    return Status::InvalidArgument(where + ": external data location '" + location +
                                   "' must be a relative path inside the model's folder");
  }
  if (offset < 0) return Status::Corruption(where + ": negative external data offset " + std::to_string(offset));
  if (length >= 0 && length != need) {
    return Status::Corruption(where + ": external data length " + std::to_string(length) +
                              " does not match shape " + ShapeToString(shape) + " (" + std::to_string(need) +
                              " bytes)");
  }
  ExternalRef ref{fs::path(base_dir) / location, offset};
  std::error_code ec;
  const auto file_size = fs::file_size(ref.file, ec);
  if (ec) return Status::NotFound(where + ": external data file not found: " + ref.file.string());
  if (static_cast<uint64_t>(offset) > file_size || file_size - static_cast<uint64_t>(offset) < static_cast<uint64_t>(need)) {
    return Status::Corruption(where + ": external data file " + ref.file.string() + " is truncated (wanted " +
                              std::to_string(need) + " bytes at offset " + std::to_string(offset) + ", file has " +
                              std::to_string(file_size) + ")");
  }
  return ref;
}

Status ReadExternalData(const ExternalRef& ref, const std::string& where, Tensor& out) {
  std::ifstream in(ref.file, std::ios::binary);
  if (!in) return Status::IOError(where + ": cannot open external data file " + ref.file.string());
  const bool packed = IsPacked4Bit(out.dtype());
  const auto need = static_cast<std::streamsize>(FileBytes(out.dtype(), out.numel()));
  std::string buffer(packed ? static_cast<size_t>(need) : 0, '\0');
  in.seekg(ref.offset);
  in.read(packed ? buffer.data() : static_cast<char*>(out.raw_data()), need);
  if (packed && in.gcount() == need) UnpackNibbles(reinterpret_cast<const uint8_t*>(buffer.data()), out.numel(), out);
  if (in.gcount() != need) {
    return Status::Corruption(where + ": external data file " + ref.file.string() + " is truncated (wanted " +
                              std::to_string(need) + " bytes at offset " + std::to_string(ref.offset) + ")");
  }
  return Status::OK();
}

// External data of at least this many bytes is mapped, not read: the weights
// of a model over 2 GB are then paged in from the file as they are used (and
// can be paged out again under memory pressure) instead of being copied into
// memory. The mapped tensor is a view (Tensor::View), aligned to its element
// size as every view: onnx's own writer packs tensors without padding, sparq's
// pads to 64 bytes. Smaller tensors, and data at an offset that is not a
// multiple of the element size, are read into a buffer.
constexpr int64_t kMapExternalDataBytes = int64_t{1} << 20;

// A tensor over the mapped bytes of `ref` (see MapFileRegion: private, the
// file is never written); the mapping lives as long as the tensor's copies.
StatusOr<Tensor> MapExternalData(const ExternalRef& ref, const std::string& where, DataType dtype, const Shape& shape,
                                 int64_t nbytes) {
  auto region = MapFileRegion(ref.file.string(), static_cast<uint64_t>(ref.offset), static_cast<uint64_t>(nbytes));
  if (!region.ok()) return region.status().WithContext(where + ": external data");
  auto t = Tensor::View(dtype, shape, region->data, region->owner);
  if (!t.ok()) return t.status().WithContext(where);
  return t;
}

// The number of values a typed field (float_data, int32_data, ...) holds.
int64_t TypedValueCount(const onnx::TensorProto& proto, DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return proto.float_data_size();
    case DataType::kFloat64: return proto.double_data_size();
    case DataType::kInt64: return proto.int64_data_size();
    case DataType::kUInt32:
    case DataType::kUInt64: return proto.uint64_data_size();
    default: return proto.int32_data_size();
  }
}

StatusOr<Tensor> TensorFromProto(const onnx::TensorProto& proto, const std::string& base_dir) {
  const std::string where = "tensor '" + proto.name() + "'";
  auto dtype = DataTypeFromOnnx(proto.data_type());
  if (!dtype.ok()) return dtype.status().WithContext(where);
  Shape shape(proto.dims().begin(), proto.dims().end());
  // Sizes are checked against the data before anything is allocated, so a
  // corrupt shape cannot ask for gigabytes (or overflow the element count).
  auto count = CheckedNumElements(shape, *dtype);
  if (!count.ok()) return Status::Corruption(where + ": " + count.status().message());
  const int64_t n = *count;
  const int64_t nbytes = FileBytes(*dtype, n);
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    SPARQ_ASSIGN_OR_RETURN(ExternalRef ref, LocateExternalData(proto, base_dir, nbytes, shape));
    if (!IsPacked4Bit(*dtype) && nbytes >= kMapExternalDataBytes &&
        ref.offset % static_cast<int64_t>(DataTypeSize(*dtype)) == 0) {
      return MapExternalData(ref, where, *dtype, shape, nbytes);
    }
    Tensor t(*dtype, shape);
    SPARQ_RETURN_IF_ERROR(ReadExternalData(ref, where, t));
    return t;
  }
  if (proto.has_raw_data()) {
    if (static_cast<int64_t>(proto.raw_data().size()) != nbytes) {
      return Status::Corruption(where + ": raw_data has " + std::to_string(proto.raw_data().size()) +
                                " bytes but shape " + ShapeToString(shape) + " of " + DataTypeName(*dtype) +
                                " needs " + std::to_string(nbytes));
    }
    Tensor t(*dtype, shape);
    if (IsPacked4Bit(*dtype)) UnpackNibbles(reinterpret_cast<const uint8_t*>(proto.raw_data().data()), n, t);
    else if (nbytes > 0) std::memcpy(t.raw_data(), proto.raw_data().data(), nbytes);
    return t;
  }
  if (IsPacked4Bit(*dtype)) {  // int32_data: one packed byte per entry
    if (proto.int32_data_size() != nbytes) {
      return Status::Corruption(where + ": holds " + std::to_string(proto.int32_data_size()) +
                                " packed 4-bit pairs but shape " + ShapeToString(shape) + " needs " +
                                std::to_string(nbytes));
    }
    std::vector<uint8_t> packed(proto.int32_data().begin(), proto.int32_data().end());
    Tensor t(*dtype, shape);
    UnpackNibbles(packed.data(), n, t);
    return t;
  }
  if (const int64_t have = TypedValueCount(proto, *dtype); have != n) {
    return Status::Corruption(where + ": holds " + std::to_string(have) + " values but shape " +
                              ShapeToString(shape) + " needs " + std::to_string(n));
  }
  Tensor t(*dtype, shape);
  switch (*dtype) {
    case DataType::kFloat32:
      CopyConvert(proto.float_data().data(), t.data<float>(), n);
      break;
    case DataType::kFloat64:
      CopyConvert(proto.double_data().data(), t.data<double>(), n);
      break;
    case DataType::kInt64:
      CopyConvert(proto.int64_data().data(), t.data<int64_t>(), n);
      break;
    case DataType::kUInt32:
    case DataType::kUInt64:
      if (*dtype == DataType::kUInt32) CopyConvert(proto.uint64_data().data(), t.data<uint32_t>(), n);
      else CopyConvert(proto.uint64_data().data(), t.data<uint64_t>(), n);
      break;
    default: {  // int32_data holds int32, int16, int8, uint16, uint8, bool, float16, bfloat16
      const int32_t* src = proto.int32_data().data();
      void* dst = t.raw_data();
      switch (*dtype) {
        case DataType::kInt32: CopyConvert(src, static_cast<int32_t*>(dst), n); break;
        case DataType::kInt16: CopyConvert(src, static_cast<int16_t*>(dst), n); break;
        case DataType::kInt8: CopyConvert(src, static_cast<int8_t*>(dst), n); break;
        case DataType::kUInt16:
        case DataType::kFloat16:
        case DataType::kBFloat16: CopyConvert(src, static_cast<uint16_t*>(dst), n); break;
        case DataType::kFloat8E4M3FN:  // int32_data holds its bits
        case DataType::kUInt8: CopyConvert(src, static_cast<uint8_t*>(dst), n); break;
        case DataType::kBool:
          for (int64_t i = 0; i < n; ++i) static_cast<bool*>(dst)[i] = src[i] != 0;
          break;
        default: return Status::Internal(where + ": unhandled type " + DataTypeName(*dtype));
      }
    }
  }
  return t;
}

void TensorToProto(const std::string& name, const Tensor& t, onnx::TensorProto* proto) {
  proto->set_name(name);
  proto->set_data_type(static_cast<int32_t>(t.dtype()));
  for (int64_t d : t.shape()) proto->add_dims(d);
  if (IsPacked4Bit(t.dtype())) proto->set_raw_data(PackNibbles(t));
  else proto->set_raw_data(std::string(static_cast<const char*>(t.raw_data()), t.nbytes()));
}

// The nonzero count of `t` when storing it sparse (values + int64 linear
// indices) is smaller than dense; -1 otherwise.
int64_t SparseWorthIt(const Tensor& t) {
  const size_t esize = DataTypeSize(t.dtype());
  if (t.numel() < 64 || esize == 0 || IsPacked4Bit(t.dtype())) return -1;  // 4-bit: dense is small already
  const uint8_t* p = static_cast<const uint8_t*>(t.raw_data());
  int64_t nnz = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const uint8_t* e = p + i * esize;
    nnz += std::any_of(e, e + esize, [](uint8_t b) { return b != 0; });
  }
  return nnz * static_cast<int64_t>(esize + 8) < static_cast<int64_t>(t.nbytes()) ? nnz : -1;
}

// Writes `t` as a SparseTensorProto with `nnz` values and linear indices in
// ascending order (what onnx.checker requires). A value counts as zero when
// all its bytes are zero (+0.0 for floats: -0.0 is kept).
void SparseTensorToProto(const std::string& name, const Tensor& t, int64_t nnz, onnx::SparseTensorProto* sp) {
  const size_t esize = DataTypeSize(t.dtype());
  for (int64_t d : t.shape()) sp->add_dims(d);
  std::string values, indices;
  values.reserve(nnz * esize);
  indices.reserve(nnz * 8);
  const char* p = static_cast<const char*>(t.raw_data());
  for (int64_t i = 0; i < t.numel(); ++i) {
    const char* e = p + i * esize;
    if (std::all_of(e, e + esize, [](char b) { return b == 0; })) continue;
    values.append(e, esize);
    indices.append(reinterpret_cast<const char*>(&i), 8);  // little-endian, as raw_data is
  }
  onnx::TensorProto* v = sp->mutable_values();
  v->set_name(name);
  v->set_data_type(static_cast<int32_t>(t.dtype()));
  v->add_dims(nnz);
  v->set_raw_data(values);
  onnx::TensorProto* ix = sp->mutable_indices();
  ix->set_data_type(onnx::TensorProto::INT64);
  ix->add_dims(nnz);
  ix->set_raw_data(indices);
}

// Expands a SparseTensorProto (values [NNZ], indices [NNZ] linear or
// [NNZ, rank] coordinates) into a dense tensor.
StatusOr<Tensor> DenseFromSparseProto(const onnx::SparseTensorProto& sp, const std::string& base_dir) {
  SPARQ_ASSIGN_OR_RETURN(Tensor values, TensorFromProto(sp.values(), base_dir));
  SPARQ_ASSIGN_OR_RETURN(Tensor indices, TensorFromProto(sp.indices(), base_dir));
  Shape shape(sp.dims().begin(), sp.dims().end());
  Tensor dense(values.dtype(), shape);
  const int64_t nnz = values.numel();
  const size_t esize = DataTypeSize(values.dtype());
  std::vector<int64_t> idx = indices.ToInt64Vector();
  const bool linear = indices.rank() == 1;
  if (values.rank() != 1 || (linear ? indices.dim(0) != nnz
                                    : indices.rank() != 2 || indices.dim(0) != nnz ||
                                          indices.dim(1) != static_cast<int64_t>(shape.size()))) {
    return Status::Corruption("indices " + ShapeToString(indices.shape()) + " do not match values " +
                              ShapeToString(values.shape()) + " and dims " + ShapeToString(shape));
  }
  for (int64_t k = 0; k < nnz; ++k) {
    int64_t offset = 0;
    if (linear) {
      offset = idx[k];
    } else {
      for (size_t d = 0; d < shape.size(); ++d) {
        int64_t c = idx[k * shape.size() + d];
        if (c < 0 || c >= shape[d]) return Status::Corruption("sparse index out of range");
        offset = offset * shape[d] + c;
      }
    }
    if (offset < 0 || offset >= dense.numel()) return Status::Corruption("sparse index out of range");
    std::memcpy(static_cast<uint8_t*>(dense.raw_data()) + offset * esize,
                static_cast<const uint8_t*>(values.raw_data()) + k * esize, esize);
  }
  return dense;
}

// ---------------------------------------------------------------------------
// Attributes, value infos, nodes

Status GraphFromProto(const onnx::GraphProto& gp, const std::string& base_dir, bool subgraph, Graph* g,
                      onnx::GraphProto* release = nullptr);

StatusOr<Attribute> AttributeFromProto(const onnx::AttributeProto& proto, const std::string& base_dir) {
  Attribute a;
  a.name = proto.name();
  a.doc_string = proto.doc_string();
  using AP = onnx::AttributeProto;
  auto type = proto.type();
  if (type == AP::UNDEFINED) {  // very old files leave the type out: infer it
    if (proto.has_f()) type = AP::FLOAT;
    else if (proto.has_i()) type = AP::INT;
    else if (proto.has_s()) type = AP::STRING;
    else if (proto.has_t()) type = AP::TENSOR;
    else if (proto.floats_size() > 0) type = AP::FLOATS;
    else if (proto.ints_size() > 0) type = AP::INTS;
    else if (proto.strings_size() > 0) type = AP::STRINGS;
  }
  switch (type) {
    case AP::FLOAT: a.kind = Attribute::Kind::kFloat; a.f = proto.f(); break;
    case AP::INT: a.kind = Attribute::Kind::kInt; a.i = proto.i(); break;
    case AP::STRING: a.kind = Attribute::Kind::kString; a.s = proto.s(); break;
    case AP::FLOATS:
      a.kind = Attribute::Kind::kFloats;
      a.floats.assign(proto.floats().begin(), proto.floats().end());
      break;
    case AP::INTS:
      a.kind = Attribute::Kind::kInts;
      a.ints.assign(proto.ints().begin(), proto.ints().end());
      break;
    case AP::STRINGS:
      a.kind = Attribute::Kind::kStrings;
      a.strings.assign(proto.strings().begin(), proto.strings().end());
      break;
    case AP::TENSOR: {
      auto t = TensorFromProto(proto.t(), base_dir);
      if (t.ok()) {
        a.kind = Attribute::Kind::kTensor;
        a.t = std::move(t).value();
        break;
      }
      if (t.status().code() != StatusCode::kNotSupported) return t.status();
      [[fallthrough]];  // e.g. a string tensor: keep it opaque
    }
    case AP::GRAPH: {  // kept as written (raw) and parsed for the executor (subgraph)
      a.kind = Attribute::Kind::kOpaque;
      a.raw = proto.SerializeAsString();
      auto body = std::make_shared<Graph>();
      SPARQ_RETURN_IF_ERROR(GraphFromProto(proto.g(), base_dir, /*subgraph=*/true, body.get())
                                .WithContext("subgraph '" + proto.g().name() + "'"));
      a.subgraph = std::move(body);
      break;
    }
    default:
      a.kind = Attribute::Kind::kOpaque;
      a.raw = proto.SerializeAsString();
      break;
  }
  return a;
}

void GraphBodyToProto(const Graph& g, onnx::GraphProto* gp, bool keep_value_info);

void AttributeToProto(const Attribute& a, onnx::AttributeProto* proto) {
  using AP = onnx::AttributeProto;
  if (a.kind == Attribute::Kind::kOpaque && a.raw.empty() && a.subgraph) {  // a subgraph built in memory
    proto->set_name(a.name);
    if (!a.doc_string.empty()) proto->set_doc_string(a.doc_string);
    proto->set_type(AP::GRAPH);
    onnx::GraphProto* gp = proto->mutable_g();
    GraphBodyToProto(*a.subgraph, gp, /*keep_value_info=*/true);
    for (const auto& [name, t] : a.subgraph->initializers) TensorToProto(name, t, gp->add_initializer());
    return;
  }
  if (a.kind == Attribute::Kind::kOpaque) {
    proto->ParseFromString(a.raw);
    return;
  }
  proto->set_name(a.name);
  if (!a.doc_string.empty()) proto->set_doc_string(a.doc_string);
  switch (a.kind) {
    case Attribute::Kind::kFloat: proto->set_type(AP::FLOAT); proto->set_f(a.f); break;
    case Attribute::Kind::kInt: proto->set_type(AP::INT); proto->set_i(a.i); break;
    case Attribute::Kind::kString: proto->set_type(AP::STRING); proto->set_s(a.s); break;
    case Attribute::Kind::kTensor: proto->set_type(AP::TENSOR); TensorToProto("", a.t, proto->mutable_t()); break;
    case Attribute::Kind::kFloats:
      proto->set_type(AP::FLOATS);
      for (float f : a.floats) proto->add_floats(f);
      break;
    case Attribute::Kind::kInts:
      proto->set_type(AP::INTS);
      for (int64_t i : a.ints) proto->add_ints(i);
      break;
    case Attribute::Kind::kStrings:
      proto->set_type(AP::STRINGS);
      for (const auto& s : a.strings) proto->add_strings(s);
      break;
    case Attribute::Kind::kOpaque: break;
  }
}

ValueInfo ValueInfoFromProto(const onnx::ValueInfoProto& proto) {
  ValueInfo v;
  v.name = proto.name();
  v.doc_string = proto.doc_string();
  if (!proto.type().has_tensor_type()) {
    v.is_tensor = false;
    v.raw_type = proto.type().SerializeAsString();
    return v;
  }
  const auto& tt = proto.type().tensor_type();
  v.onnx_elem_type = tt.elem_type();
  auto dtype = DataTypeFromOnnx(tt.elem_type());
  v.dtype = dtype.ok() ? *dtype : DataType::kUndefined;
  if (tt.has_shape()) {
    v.has_shape = true;
    for (const auto& d : tt.shape().dim()) {
      Dim dim;
      if (d.has_dim_value()) dim.value = d.dim_value();
      if (d.has_dim_param()) dim.param = d.dim_param();
      v.dims.push_back(dim);
    }
  }
  return v;
}

void ValueInfoToProto(const ValueInfo& v, onnx::ValueInfoProto* proto) {
  proto->set_name(v.name);
  if (!v.doc_string.empty()) proto->set_doc_string(v.doc_string);
  if (!v.is_tensor) {
    proto->mutable_type()->ParseFromString(v.raw_type);
    return;
  }
  auto* tt = proto->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(v.dtype != DataType::kUndefined ? static_cast<int32_t>(v.dtype) : v.onnx_elem_type);
  if (v.has_shape) {
    auto* shape = tt->mutable_shape();
    for (const Dim& d : v.dims) {
      auto* pd = shape->add_dim();
      if (d.known()) pd->set_dim_value(d.value);
      else if (!d.param.empty()) pd->set_dim_param(d.param);
    }
  }
}

StatusOr<Node> NodeFromProto(const onnx::NodeProto& proto, size_t index, const std::string& base_dir) {
  Node n;
  n.name = proto.name();
  n.op_type = proto.op_type();
  n.domain = proto.domain() == "ai.onnx" ? "" : proto.domain();
  n.doc_string = proto.doc_string();
  n.inputs.assign(proto.input().begin(), proto.input().end());
  n.outputs.assign(proto.output().begin(), proto.output().end());
  for (const auto& ap : proto.attribute()) {
    auto a = AttributeFromProto(ap, base_dir);
    if (!a.ok()) {
      return a.status().WithContext("node " + (n.name.empty() ? "#" + std::to_string(index) : "'" + n.name + "'") +
                                    " (" + n.op_type + ") attribute '" + ap.name() + "'");
    }
    n.attributes.push_back(std::move(a).value());
  }
  return n;
}

// A graph's fields; a subgraph (subgraph = true) may read values of the
// graphs around it. With `release` (the same proto, writable), each
// initializer's raw_data is freed once its tensor holds it: a model with
// inline weights is then never held twice.
Status GraphFromProto(const onnx::GraphProto& gp, const std::string& base_dir, bool subgraph, Graph* out,
                      onnx::GraphProto* release) {
  Graph& g = *out;
  g.name = gp.name();
  g.doc_string = gp.doc_string();
  for (int i = 0; i < gp.initializer_size(); ++i) {
    const onnx::TensorProto& tp = gp.initializer(i);
    if (tp.name().empty()) return Status::Corruption("an initializer has no name");
    auto t = TensorFromProto(tp, base_dir);
    if (!t.ok()) return t.status().WithContext("initializer");
    g.initializers[tp.name()] = std::move(t).value();
    if (release != nullptr && tp.has_raw_data()) std::string().swap(*release->mutable_initializer(i)->mutable_raw_data());
  }
  for (const auto& sp : gp.sparse_initializer()) {
    auto t = DenseFromSparseProto(sp, base_dir);
    if (!t.ok()) return t.status().WithContext("sparse initializer '" + sp.values().name() + "'");
    g.initializers[sp.values().name()] = std::move(t).value();
  }
  for (const auto& vp : gp.input()) {
    ValueInfo v = ValueInfoFromProto(vp);
    if (g.initializers.count(v.name)) g.initializer_inputs.push_back(std::move(v));
    else g.inputs.push_back(std::move(v));
  }
  for (const auto& vp : gp.output()) g.outputs.push_back(ValueInfoFromProto(vp));
  for (const auto& vp : gp.value_info()) g.value_info.push_back(ValueInfoFromProto(vp));
  g.nodes.reserve(gp.node_size());
  for (int i = 0; i < gp.node_size(); ++i) {
    auto n = NodeFromProto(gp.node(i), i, base_dir);
    if (!n.ok()) return n.status();
    g.nodes.push_back(std::move(n).value());
  }
  return g.TopoSort(subgraph);
}

StatusOr<Model> ModelFromProto(const onnx::ModelProto& mp, const std::string& base_dir,
                               onnx::ModelProto* release = nullptr) {
  Model m;
  m.ir_version = mp.ir_version();
  for (const auto& op : mp.opset_import())
    m.opset_imports.push_back({op.domain() == "ai.onnx" ? "" : op.domain(), op.version()});
  m.producer_name = mp.producer_name();
  m.producer_version = mp.producer_version();
  m.domain = mp.domain();
  m.model_version = mp.model_version();
  m.doc_string = mp.doc_string();
  for (const auto& kv : mp.metadata_props()) m.metadata_props.emplace_back(kv.key(), kv.value());
  for (const auto& f : mp.functions()) m.raw_functions.push_back(f.SerializeAsString());
  if (!mp.has_graph()) return Status::Corruption("model has no graph");

  SPARQ_RETURN_IF_ERROR(GraphFromProto(mp.graph(), base_dir, /*subgraph=*/false, &m.graph,
                                       release != nullptr ? release->mutable_graph() : nullptr));
  return m;
}

// Writes graph fields other than the initializers (which depend on external data).
void GraphToProto(const Model& m, onnx::ModelProto* mp, bool keep_value_info) {
  mp->set_ir_version(m.ir_version);
  for (const auto& op : m.opset_imports) {
    auto* p = mp->add_opset_import();
    p->set_domain(op.domain);
    p->set_version(op.version);
  }
  if (!m.producer_name.empty()) mp->set_producer_name(m.producer_name);
  if (!m.producer_version.empty()) mp->set_producer_version(m.producer_version);
  if (!m.domain.empty()) mp->set_domain(m.domain);
  if (m.model_version != 0) mp->set_model_version(m.model_version);
  if (!m.doc_string.empty()) mp->set_doc_string(m.doc_string);
  for (const auto& kv : m.metadata_props) {
    auto* p = mp->add_metadata_props();
    p->set_key(kv.first);
    p->set_value(kv.second);
  }
  for (const auto& f : m.raw_functions) mp->add_functions()->ParseFromString(f);

  GraphBodyToProto(m.graph, mp->mutable_graph(), keep_value_info);
}

// A graph's name, nodes and value infos (its initializers are the caller's:
// external data for the main graph, inline for a subgraph).
void GraphBodyToProto(const Graph& g, onnx::GraphProto* gp, bool keep_value_info) {
  gp->set_name(g.name.empty() ? "sparq" : g.name);
  if (!g.doc_string.empty()) gp->set_doc_string(g.doc_string);
  for (const Node& n : g.nodes) {
    auto* np = gp->add_node();
    if (!n.name.empty()) np->set_name(n.name);
    np->set_op_type(n.op_type);
    if (!n.domain.empty()) np->set_domain(n.domain);
    if (!n.doc_string.empty()) np->set_doc_string(n.doc_string);
    for (const auto& s : n.inputs) np->add_input(s);
    for (const auto& s : n.outputs) np->add_output(s);
    for (const auto& a : n.attributes) AttributeToProto(a, np->add_attribute());
  }
  for (const auto& v : g.inputs) ValueInfoToProto(v, gp->add_input());
  for (const auto& v : g.initializer_inputs) ValueInfoToProto(v, gp->add_input());
  for (const auto& v : g.outputs) ValueInfoToProto(v, gp->add_output());
  if (keep_value_info)
    for (const auto& v : g.value_info) ValueInfoToProto(v, gp->add_value_info());
}

StatusOr<onnx::ModelProto> ParseModelProto(const std::string& bytes, const std::string& what) {
  onnx::ModelProto mp;
  if (bytes.empty()) return Status::Corruption(what + " is empty, not an ONNX model");
  if (!mp.ParseFromString(bytes)) {
    return Status::Corruption(what + " is not a valid ONNX model (protobuf parse failed: truncated or corrupt file)");
  }
  if (!mp.has_graph() && mp.opset_import_size() == 0) {
    return Status::Corruption(what + " parsed as protobuf but holds no ONNX graph");
  }
  return mp;
}

// The model file parsed straight from its descriptor, without a copy of its
// bytes beside the proto; files without a size (pipes) and files over 2 GiB
// (which protobuf refuses either way) go through ReadFile.
StatusOr<onnx::ModelProto> ParseModelFile(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return Status::NotFound("file not found: " + path);
  if (fs::is_directory(path, ec)) return Status::InvalidArgument(path + " is a folder, not a file");
  const uintmax_t size = fs::is_regular_file(path, ec) ? fs::file_size(path, ec) : 0;
  if (ec || size == 0 || size > static_cast<uintmax_t>(INT32_MAX)) {
    SPARQ_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
    return ParseModelProto(bytes, path);
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IOError("cannot open " + path + ": " + std::strerror(errno));
  onnx::ModelProto mp;
  const bool parsed = mp.ParseFromFileDescriptor(fd);
  ::close(fd);
  if (!parsed) {
    return Status::Corruption(path + " is not a valid ONNX model (protobuf parse failed: truncated or corrupt file)");
  }
  if (!mp.has_graph() && mp.opset_import_size() == 0) {
    return Status::Corruption(path + " parsed as protobuf but holds no ONNX graph");
  }
  return mp;
}

}  // namespace

StatusOr<Model> LoadModelFromBytes(const std::string& bytes, const std::string& base_dir,
                                   const LoadOptions& options) {
  SPARQ_ASSIGN_OR_RETURN(onnx::ModelProto mp, ParseModelProto(bytes, "input"));
  SPARQ_ASSIGN_OR_RETURN(Model m, ModelFromProto(mp, base_dir, &mp));
  if (options.infer_shapes) InferShapes(m).ok();  // best effort: see LoadOptions
  return m;
}

StatusOr<Model> LoadModel(const std::string& path, const LoadOptions& options) {
  std::string base_dir = fs::path(path).has_parent_path() ? fs::path(path).parent_path().string() : ".";
  SPARQ_ASSIGN_OR_RETURN(onnx::ModelProto mp, ParseModelFile(path));
  auto m = ModelFromProto(mp, base_dir, &mp);
  if (!m.ok()) return m.status().WithContext(path);
  if (options.infer_shapes) InferShapes(*m).ok();
  return m;
}

StatusOr<std::string> SerializeModel(const Model& model) {
  onnx::ModelProto mp;
  GraphToProto(model, &mp, true);
  auto* gp = mp.mutable_graph();
  for (const auto& [name, t] : model.graph.initializers) TensorToProto(name, t, gp->add_initializer());
  std::string bytes;
  if (!mp.SerializeToString(&bytes)) {
    return Status::InvalidArgument("model does not fit in one protobuf (2 GiB): save with external data");
  }
  return bytes;
}

// With external data, each weight goes from its buffer to the data file as
// the proto is built (AtomicFileWriter): neither the proto nor a string ever
// holds the weights, so a model over 2 GB is written with no copy of them.
// Both files are complete in their temporary files before either is renamed.
Status SaveModel(const Model& model, const std::string& path, const SaveOptions& options) {
  std::error_code ec;
  if (!options.overwrite && fs::exists(path, ec)) {
    return Status::InvalidArgument("refusing to overwrite existing file " + path);
  }
  onnx::ModelProto mp;
  GraphToProto(model, &mp, options.keep_value_info);
  auto* gp = mp.mutable_graph();
  std::string data_file = options.external_data_file.empty()
                              ? fs::path(path).filename().string() + ".data"
                              : options.external_data_file;
  const fs::path dir = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : fs::path(".");
  std::unique_ptr<AtomicFileWriter> external;
  if (options.external_data) {
    SPARQ_ASSIGN_OR_RETURN(external, AtomicFileWriter::Open((dir / data_file).string()));
  }
  const std::string too_big = "model does not fit in one protobuf (2 GiB): save with external data";
  uint64_t inline_bytes = 0;
  std::set<std::string> graph_inputs;
  for (const auto& v : model.graph.initializer_inputs) graph_inputs.insert(v.name);
  for (const auto& [name, t] : model.graph.initializers) {
    if (options.sparse_initializers && !graph_inputs.count(name)) {
      if (const int64_t nnz = SparseWorthIt(t); nnz >= 0) {
        SparseTensorToProto(name, t, nnz, gp->add_sparse_initializer());
        continue;
      }
    }
    auto* tp = gp->add_initializer();
    if (!options.external_data || t.nbytes() < options.external_data_threshold) {
      // Refused before the proto copies more than protobuf can serialize.
      inline_bytes += t.nbytes();
      if (inline_bytes > static_cast<uint64_t>(INT32_MAX)) return Status::InvalidArgument(too_big);
      TensorToProto(name, t, tp);
      continue;
    }
    // Same fields as onnx.external_data_helper; offsets aligned to 64 bytes.
    SPARQ_RETURN_IF_ERROR(external->AppendZeros(static_cast<size_t>((64 - external->size() % 64) % 64)));
    tp->set_name(name);
    tp->set_data_type(static_cast<int32_t>(t.dtype()));
    for (int64_t d : t.shape()) tp->add_dims(d);
    tp->set_data_location(onnx::TensorProto::EXTERNAL);
    auto add_kv = [&](const char* k, const std::string& v) {
      auto* kv = tp->add_external_data();
      kv->set_key(k);
      kv->set_value(v);
    };
    add_kv("location", data_file);
    add_kv("offset", std::to_string(external->size()));
    add_kv("length", std::to_string(FileBytes(t.dtype(), t.numel())));
    if (IsPacked4Bit(t.dtype())) {
      const std::string packed = PackNibbles(t);
      SPARQ_RETURN_IF_ERROR(external->Append(packed.data(), packed.size()));
    } else {
      SPARQ_RETURN_IF_ERROR(external->Append(t.raw_data(), t.nbytes()));
    }
  }
  std::string bytes;
  if (!mp.SerializeToString(&bytes)) return Status::InvalidArgument(too_big);
  mp.Clear();
  SPARQ_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> out, AtomicFileWriter::Open(path));
  SPARQ_RETURN_IF_ERROR(out->Append(bytes.data(), bytes.size()));
  SPARQ_RETURN_IF_ERROR(out->Close());
  if (external) SPARQ_RETURN_IF_ERROR(external->Commit());
  return out->Commit();
}

StatusOr<std::pair<std::string, Tensor>> ParseTensorProto(const std::string& bytes) {
  onnx::TensorProto tp;
  if (!tp.ParseFromString(bytes)) return Status::Corruption("not a valid onnx.TensorProto");
  if (!tp.has_data_type()) return Status::Corruption("onnx.TensorProto without a data type");
  SPARQ_ASSIGN_OR_RETURN(Tensor t, TensorFromProto(tp, "."));
  return std::make_pair(tp.name(), std::move(t));
}

std::string SerializeTensorProto(const std::string& name, const Tensor& t) {
  onnx::TensorProto tp;
  TensorToProto(name, t, &tp);
  return tp.SerializeAsString();
}

Status CheckModel(const Model& model) {
  auto bytes = SerializeModel(model);
  if (!bytes.ok()) return bytes.status();
  onnx::ModelProto mp;
  mp.ParseFromString(*bytes);
  try {
    onnx::checker::check_model(mp);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("ONNX checker: ") + e.what());
  }
  return Status::OK();
}

Status InferShapes(Model& model) {
  onnx::ModelProto mp;
  GraphToProto(model, &mp, false);
  // Shape inference needs the values of small integer initializers (Reshape
  // targets, Slice bounds) but only the shapes of weights: send weights as
  // graph inputs without data.
  auto* gp = mp.mutable_graph();
  std::set<std::string> listed;
  for (const auto& v : model.graph.initializer_inputs) listed.insert(v.name);
  for (const auto& [name, t] : model.graph.initializers) {
    const bool small = t.numel() <= 64 || t.dtype() == DataType::kInt64 || t.dtype() == DataType::kInt32;
    if (small) TensorToProto(name, t, gp->add_initializer());
    if (small || listed.count(name)) continue;
    auto* vi = gp->add_input();
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(static_cast<int32_t>(t.dtype()));
    auto* shape = tt->mutable_shape();
    for (int64_t d : t.shape()) shape->add_dim()->set_dim_value(d);
  }
  try {
    onnx::shape_inference::InferShapes(mp);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("ONNX shape inference: ") + e.what());
  }
  std::vector<ValueInfo> inferred;
  for (const auto& vp : mp.graph().value_info()) inferred.push_back(ValueInfoFromProto(vp));
  model.graph.value_info = std::move(inferred);
  return Status::OK();
}

}  // namespace sparq
