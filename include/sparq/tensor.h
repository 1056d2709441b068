// Tensors: a data type, a shape and a shared, 64-byte aligned buffer (or, for
// a view made by Tensor::View, the caller's memory).
//
// A Tensor is a cheap handle: copies share the buffer. Kernels treat their
// inputs as immutable and allocate fresh outputs, so sharing is safe; call
// Clone() for a private copy before mutating a tensor that others may hold.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sparq/export.h"
#include "sparq/status.h"

namespace sparq {

// Element types sparq stores. The numeric values are ONNX's TensorProto.DataType.
enum class DataType : int32_t {
  kUndefined = 0,
  kFloat32 = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kBFloat16 = 16,
  kFloat8E4M3FN = 17,  // storage only: Q/DQ and Cast read and write it; no arithmetic kernel takes it
  // 4-bit integers: one element per byte in memory (int4 sign-extended in an
  // int8, uint4 in 0..15); in ONNX files packed two per byte, low nibble first.
  kUInt4 = 21,
  kInt4 = 22,
};

// One row of the data type traits table.
struct SPARQ_API DataTypeInfo {
  DataType type;
  const char* name;    // "float32", "int8", ... (numpy's spelling)
  size_t size;         // bytes per element
  bool is_float;       // float16, bfloat16, float32, float64, float8e4m3fn
  bool is_signed;      // signed integers and floats
};

// Traits of `type`; nullptr for kUndefined and types sparq does not store.
SPARQ_API const DataTypeInfo* GetDataTypeInfo(DataType type);
// "float32" etc.; "undefined(<n>)" for unknown values.
SPARQ_API std::string DataTypeName(DataType type);
// Element size in bytes; 0 for unknown types.
SPARQ_API size_t DataTypeSize(DataType type);
// Maps an ONNX TensorProto.DataType number; NotSupported for string, complex and
// the float8 types other than float8e4m3fn.
SPARQ_API StatusOr<DataType> DataTypeFromOnnx(int32_t onnx_type);
// Parses numpy's names ("float32", "int64", "bool", ...).
SPARQ_API StatusOr<DataType> DataTypeFromName(const std::string& name);

// IEEE half and bfloat16 conversions (round to nearest even).
SPARQ_API uint16_t FloatToHalf(float f);
SPARQ_API float HalfToFloat(uint16_t h);
SPARQ_API uint16_t FloatToBFloat16(float f);
SPARQ_API float BFloat16ToFloat(uint16_t b);
// float8e4m3fn (ONNX's FLOAT8E4M3FN: 1 sign, 4 exponent (bias 7), 3 mantissa
// bits; no infinities; NaN = 0x7F / 0xFF; largest finite 448; subnormals down
// to 2^-9), as ONNX's Cast and QuantizeLinear define it: round to nearest even;
// saturate clamps out-of-range values and infinities to +-448, else they become
// NaN; NaN stays NaN (sign kept).
SPARQ_API uint8_t FloatToFloat8E4M3(float f, bool saturate);
SPARQ_API float Float8E4M3ToFloat(uint8_t b);

// Storage types for 16-bit floats, so templates can tell them from uint16_t.
struct SPARQ_API Float16 {
  uint16_t bits;
};
struct SPARQ_API BFloat16 {
  uint16_t bits;
};
// Storage type for float8e4m3fn, so templates can tell it from uint8_t.
struct SPARQ_API Float8E4M3 {
  uint8_t bits;
};

// Maps a C++ type to its DataType (static check in Tensor::data<T>()).
template <typename T> struct DataTypeOf;
template <> struct DataTypeOf<float> { static constexpr DataType value = DataType::kFloat32; };
template <> struct DataTypeOf<double> { static constexpr DataType value = DataType::kFloat64; };
template <> struct DataTypeOf<int8_t> { static constexpr DataType value = DataType::kInt8; };
template <> struct DataTypeOf<uint8_t> { static constexpr DataType value = DataType::kUInt8; };
template <> struct DataTypeOf<int16_t> { static constexpr DataType value = DataType::kInt16; };
template <> struct DataTypeOf<uint16_t> { static constexpr DataType value = DataType::kUInt16; };
template <> struct DataTypeOf<int32_t> { static constexpr DataType value = DataType::kInt32; };
template <> struct DataTypeOf<uint32_t> { static constexpr DataType value = DataType::kUInt32; };
template <> struct DataTypeOf<int64_t> { static constexpr DataType value = DataType::kInt64; };
template <> struct DataTypeOf<uint64_t> { static constexpr DataType value = DataType::kUInt64; };
template <> struct DataTypeOf<bool> { static constexpr DataType value = DataType::kBool; };
template <> struct DataTypeOf<Float16> { static constexpr DataType value = DataType::kFloat16; };
template <> struct DataTypeOf<BFloat16> { static constexpr DataType value = DataType::kBFloat16; };
template <> struct DataTypeOf<Float8E4M3> { static constexpr DataType value = DataType::kFloat8E4M3FN; };

using Shape = std::vector<int64_t>;

// Where a tensor's buffer lives. Host tensors (kCpu) can be read by any code;
// a kCuda tensor's raw_data() is a device pointer that only its backend's
// kernels and copies touch (kernels/backend.h). `index` tells devices of one
// type apart (CUDA ordinals; a test backend may use a second host "device").
enum class DeviceType : int32_t { kCpu = 0, kCuda = 1 };
struct SPARQ_API Device {
  DeviceType type = DeviceType::kCpu;
  int index = 0;
  bool is_host() const { return type == DeviceType::kCpu; }
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  // "cpu", "cpu:1", "cuda:0".
  std::string ToString() const;
};

// Number of elements of `shape` (1 for a scalar).
SPARQ_API int64_t NumElements(const Shape& shape);
// NumElements for shapes from untrusted input (files, shape tensors):
// InvalidArgument for a negative dimension, or when the element count or its
// size in bytes as `type` would exceed 2^62.
SPARQ_API StatusOr<int64_t> CheckedNumElements(const Shape& shape, DataType type);
// "[1, 3, 224, 224]".
SPARQ_API std::string ShapeToString(const Shape& shape);

class SPARQ_API Tensor {
 public:
  Tensor() = default;
  // Allocates a zero-filled tensor.
  Tensor(DataType type, Shape shape);
  // Allocates a tensor whose contents are unspecified: for outputs that a
  // kernel writes in full, sparing the zero fill.
  static Tensor Uninitialized(DataType type, Shape shape);

  // Copies `values` into a new tensor of `shape`. values.size() must equal
  // NumElements(shape); when it does not (or a dimension is negative), the
  // result is an undefined Tensor (defined() is false, no buffer) and nothing
  // is written, in every build type: Executor::Run and the kernels reject an
  // undefined tensor with an error naming the input. For sizes that come
  // from data, check them first or use View / the Tensor(type, shape) constructor.
  template <typename T>
  static Tensor FromVector(Shape shape, const std::vector<T>& values);

  // A tensor over memory the caller owns: no copy. `data` must hold
  // NumElements(shape) elements of `type`, aligned to the element size.
  // Lifetime: the memory must stay valid (and unchanged, if sparq may read it
  // concurrently) as long as any copy of the returned Tensor lives, including
  // executor outputs that alias an input (Identity, Reshape, Flatten...);
  // pass `owner` (anything holding the memory, e.g. a shared_ptr to your
  // buffer) to have the tensor keep it alive instead. sparq never writes to
  // its inputs; writing through raw_data() of a view writes the caller's memory.
  // Errors: InvalidArgument for an unknown type, a negative dimension, an
  // element count over 2^62 bytes, a null `data` with elements, or misalignment.
  static StatusOr<Tensor> View(DataType type, Shape shape, void* data, std::shared_ptr<const void> owner = nullptr);
  // A tensor over a buffer a backend allocated on `device` (kernels/backend.h):
  // `buffer` holds at least NumElements(shape) elements of `type` and frees
  // itself (its deleter) when the last copy of the tensor goes.
  static Tensor OnDevice(DataType type, Shape shape, std::shared_ptr<uint8_t> buffer, Device device);
  // A rank-0 tensor holding `value`.
  template <typename T>
  static Tensor Scalar(T value) { return FromVector<T>({}, {value}); }

  bool defined() const { return type_ != DataType::kUndefined; }
  DataType dtype() const { return type_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(size_t i) const { return shape_[i]; }
  size_t rank() const { return shape_.size(); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * DataTypeSize(type_); }
  // Where the buffer lives; the host for every tensor not made by OnDevice.
  // The host-side helpers below (Clone, ToFloat32, GetAsDouble, CastTo,
  // ToInt64Vector, Equals) read host tensors only: on a device tensor they
  // return an undefined tensor, 0, an empty vector or false.
  Device device() const { return device_; }

  void* raw_data() { return data_.get(); }
  const void* raw_data() const { return data_.get(); }
  template <typename T> T* data() {
    assert(DataTypeOf<T>::value == type_);
    return static_cast<T*>(raw_data());
  }
  template <typename T> const T* data() const {
    assert(DataTypeOf<T>::value == type_);
    return static_cast<const T*>(raw_data());
  }

  // Same buffer, new shape with the same element count.
  StatusOr<Tensor> Reshaped(Shape new_shape) const;
  // A private deep copy.
  Tensor Clone() const;
  // Element i converted to double (any numeric type); for printing and metrics.
  double GetAsDouble(int64_t i) const;
  // A float32 copy of any numeric tensor.
  Tensor ToFloat32() const;
  // Converts to `type` (ONNX Cast semantics for numeric types; floats to ints truncate).
  Tensor CastTo(DataType type) const;
  // Values as int64 (any integer tensor); for shape-like inputs.
  std::vector<int64_t> ToInt64Vector() const;
  // Bytewise equality of type, shape and contents.
  bool Equals(const Tensor& other) const;

 private:
  DataType type_ = DataType::kUndefined;
  Shape shape_;
  int64_t numel_ = 0;
  std::shared_ptr<uint8_t> data_;
  Device device_;
};

// Frees the buffers that freed tensors left for reuse (large buffers are kept,
// up to 512 MiB, and handed to later tensors of about their size); returns the
// bytes freed. Tensors alive keep their memory.
SPARQ_API size_t ReleaseCachedTensorBuffers();

template <typename T>
Tensor Tensor::FromVector(Shape shape, const std::vector<T>& values) {
  for (int64_t d : shape)
    if (d < 0) return Tensor();
  if (static_cast<int64_t>(values.size()) != NumElements(shape)) return Tensor();  // see the declaration
  Tensor t(DataTypeOf<T>::value, std::move(shape));
  T* out = t.data<T>();
  for (size_t i = 0; i < values.size(); ++i) out[i] = values[i];
  return t;
}
// std::vector<bool> is packed, so it needs its own copy loop.
template <>
Tensor Tensor::FromVector<bool>(Shape shape, const std::vector<bool>& values);

}  // namespace sparq
