#include "sparq/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <limits>
#include <iterator>
#include <sstream>
#include <type_traits>

#include "core/half_bits.h"

namespace sparq {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kNotSupported: return "NotSupported";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kCorruption: return "Corruption";
    case StatusCode::kIOError: return "IOError";
    case StatusCode::kInternal: return "Internal";
    case StatusCode::kCancelled: return "Cancelled";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

void internal::ReportValueOfError(const Status& status) {
  std::fprintf(stderr, "sparq: StatusOr::value() called on an error: %s\n", status.ToString().c_str());
}

namespace {

// The traits table: one row per stored type.
constexpr DataTypeInfo kDataTypes[] = {
    {DataType::kFloat32, "float32", 4, true, true},
    {DataType::kUInt8, "uint8", 1, false, false},
    {DataType::kInt8, "int8", 1, false, true},
    {DataType::kUInt16, "uint16", 2, false, false},
    {DataType::kInt16, "int16", 2, false, true},
    {DataType::kInt32, "int32", 4, false, true},
    {DataType::kInt64, "int64", 8, false, true},
    {DataType::kBool, "bool", 1, false, false},
    {DataType::kFloat16, "float16", 2, true, true},
    {DataType::kFloat64, "float64", 8, true, true},
    {DataType::kUInt32, "uint32", 4, false, false},
    {DataType::kUInt64, "uint64", 8, false, false},
    {DataType::kBFloat16, "bfloat16", 2, true, true},
    {DataType::kUInt4, "uint4", 1, false, false},  // one element per byte in memory
    {DataType::kInt4, "int4", 1, false, true},
    {DataType::kFloat8E4M3FN, "float8e4m3fn", 1, true, true},
};

// Freed tensor buffers of at least kMinCachedBytes are kept, up to
// kMaxCachedBytes in all, and handed to later allocations that fit them with
// at most 2x to spare (best fit): the values of one layer reuse the memory of
// the layers before it, and each batch that of the last. Large blocks would
// otherwise go back to the OS on free and come back as fresh pages, each
// costing a page fault on first touch (30% of a batch-32 mobilenet_v2 run).
// Blocks are zeroed on allocation unless the caller asks otherwise
// (Tensor::Uninitialized).
class BufferCache {
 public:
  static constexpr size_t kMinCachedBytes = size_t{1} << 16;
  static constexpr size_t kMaxCachedBytes = size_t{1} << 29;  // 512 MiB

  static BufferCache& Get() {
    static BufferCache* cache = new BufferCache();  // never destroyed: tensors may outlive static destruction
    return *cache;
  }

  // A cached block of capacity in [bytes, 2 * bytes] (its capacity in
  // *capacity), or nullptr.
  uint8_t* Take(size_t bytes, size_t* capacity) {
    if (bytes < kMinCachedBytes) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.lower_bound(bytes);
    if (it == free_.end() || it->first > 2 * bytes) return nullptr;
    uint8_t* p = it->second;
    *capacity = it->first;
    free_.erase(it);
    cached_ -= *capacity;
    return p;
  }

  void Give(uint8_t* p, size_t bytes) {
    if (bytes >= kMinCachedBytes) {
      std::lock_guard<std::mutex> lock(mu_);
      if (cached_ + bytes <= kMaxCachedBytes) {
        free_.emplace(bytes, p);
        cached_ += bytes;
        return;
      }
    }
    std::free(p);
  }

  size_t Release() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [bytes, p] : free_) std::free(p);
    free_.clear();
    const size_t freed = cached_;
    cached_ = 0;
    return freed;
  }

 private:
  std::mutex mu_;
  std::multimap<size_t, uint8_t*> free_;
  size_t cached_ = 0;
};

std::shared_ptr<uint8_t> AllocateAligned(size_t bytes, bool zero = true) {
  constexpr size_t kAlign = 64;
  size_t rounded = ((bytes + kAlign - 1) / kAlign) * kAlign;
  if (rounded == 0) rounded = kAlign;
  size_t capacity = rounded;
  uint8_t* p = BufferCache::Get().Take(rounded, &capacity);
  if (p == nullptr) p = static_cast<uint8_t*>(std::aligned_alloc(kAlign, rounded));
  if (p != nullptr && zero) std::memset(p, 0, rounded);
  return std::shared_ptr<uint8_t>(p, [capacity](uint8_t* q) {
    if (q != nullptr) BufferCache::Get().Give(q, capacity);
  });
}

template <typename T>
double LoadAsDouble(const void* base, int64_t i) {
  return static_cast<double>(static_cast<const T*>(base)[i]);
}

}  // namespace

size_t ReleaseCachedTensorBuffers() { return BufferCache::Get().Release(); }

const DataTypeInfo* GetDataTypeInfo(DataType type) {
  for (const auto& row : kDataTypes)
    if (row.type == type) return &row;
  return nullptr;
}

std::string DataTypeName(DataType type) {
  const DataTypeInfo* info = GetDataTypeInfo(type);
  if (info != nullptr) return info->name;
  return "undefined(" + std::to_string(static_cast<int>(type)) + ")";
}

size_t DataTypeSize(DataType type) {
  const DataTypeInfo* info = GetDataTypeInfo(type);
  return info != nullptr ? info->size : 0;
}

StatusOr<DataType> DataTypeFromOnnx(int32_t onnx_type) {
  const DataTypeInfo* info = GetDataTypeInfo(static_cast<DataType>(onnx_type));
  if (info != nullptr) return info->type;
  static const char* kOnnxNames[] = {"UNDEFINED", "FLOAT",  "UINT8",   "INT8",      "UINT16",
                                     "INT16",     "INT32",  "INT64",   "STRING",    "BOOL",
                                     "FLOAT16",   "DOUBLE", "UINT32",  "UINT64",    "COMPLEX64",
                                     "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ",
                                     "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4", "INT4"};
  std::string name = (onnx_type >= 0 && onnx_type < static_cast<int32_t>(std::size(kOnnxNames)))
                         ? kOnnxNames[onnx_type]
                         : std::to_string(onnx_type);
  return Status::NotSupported("ONNX data type " + name + " is not supported");
}

StatusOr<DataType> DataTypeFromName(const std::string& name) {
  for (const auto& row : kDataTypes)
    if (name == row.name) return row.type;
  if (name == "float") return DataType::kFloat32;
  if (name == "double") return DataType::kFloat64;
  if (name == "half") return DataType::kFloat16;
  return Status::NotSupported("unknown data type '" + name + "'");
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return FloatBitsToHalfBits(x);
}

float HalfToFloat(uint16_t h) {
  const uint32_t bits = HalfBitsToFloatBits(h);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToBFloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float BFloat16ToFloat(uint16_t b) {
  uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint8_t FloatToFloat8E4M3(float f, bool saturate) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const auto sign = static_cast<uint8_t>((x >> 24) & 0x80u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7f;                            // NaN
  if (abs == 0x7f800000u) return sign | (saturate ? 0x7e : 0x7f);       // infinity
  if (abs < 0x3c800000u) {  // below 2^-6, the smallest normal: value = round(f / 2^-9)
    if (abs <= 0x3a800000u) return sign;  // at most half the smallest subnormal (2^-10): ties to 0
    const uint32_t exp = abs >> 23;                  // in [117, 120]
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 141 - exp;                // in [21, 24]
    uint32_t result = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (result & 1u))) ++result;  // may carry into 0x08, the smallest normal
    return static_cast<uint8_t>(sign | result);
  }
  // Normal: round the mantissa from 23 to 3 bits (nearest even), rebias 127 -> 7.
  const uint32_t rounded = abs + 0x7ffffu + ((abs >> 20) & 1u);
  const uint32_t code = (rounded - (120u << 23)) >> 20;
  if (code > 0x7e) return sign | (saturate ? 0x7e : 0x7f);  // beyond 448 once rounded
  return static_cast<uint8_t>(sign | code);
}

float Float8E4M3ToFloat(uint8_t b) {
  const uint32_t sign = (static_cast<uint32_t>(b) & 0x80u) << 24;
  const uint32_t exp = (b >> 3) & 0xfu;
  const uint32_t mant = b & 0x7u;
  uint32_t bits;
  if (exp == 0xf && mant == 0x7) {
    bits = sign | 0x7fc00000u;  // NaN
  } else if (exp == 0) {
    const float v = static_cast<float>(mant) * 0.001953125f;  // mant * 2^-9, exact
    std::memcpy(&bits, &v, 4);
    bits |= sign;
  } else {
    bits = sign | ((exp + 120u) << 23) | (mant << 20);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

StatusOr<int64_t> CheckedNumElements(const Shape& shape, DataType type) {
  constexpr int64_t kLimit = int64_t{1} << 62;
  const auto esize = static_cast<int64_t>(DataTypeSize(type));
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return Status::InvalidArgument("negative dimension in shape " + ShapeToString(shape));
    if (d != 0 && n > kLimit / d) return Status::InvalidArgument("shape " + ShapeToString(shape) + " is too large");
    n *= d;
  }
  if (esize > 0 && n > kLimit / esize) return Status::InvalidArgument("shape " + ShapeToString(shape) + " is too large");
  return n;
}

std::string ShapeToString(const Shape& shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

Tensor::Tensor(DataType type, Shape shape)
    : type_(type), shape_(std::move(shape)), numel_(NumElements(shape_)) {
  data_ = AllocateAligned(nbytes());
}

Tensor Tensor::Uninitialized(DataType type, Shape shape) {
  Tensor t;
  t.type_ = type;
  t.shape_ = std::move(shape);
  t.numel_ = NumElements(t.shape_);
  t.data_ = AllocateAligned(t.nbytes(), /*zero=*/false);
  return t;
}

template <>
Tensor Tensor::FromVector<bool>(Shape shape, const std::vector<bool>& values) {
  for (int64_t d : shape)
    if (d < 0) return Tensor();
  if (static_cast<int64_t>(values.size()) != NumElements(shape)) return Tensor();  // see the declaration
  Tensor t(DataType::kBool, std::move(shape));
  bool* out = t.data<bool>();
  for (size_t i = 0; i < values.size(); ++i) out[i] = values[i];
  return t;
}

StatusOr<Tensor> Tensor::View(DataType type, Shape shape, void* data, std::shared_ptr<const void> owner) {
  const DataTypeInfo* info = GetDataTypeInfo(type);
  if (info == nullptr) return Status::InvalidArgument("Tensor::View: unknown data type " + DataTypeName(type));
  SPARQ_ASSIGN_OR_RETURN(int64_t numel, CheckedNumElements(shape, type));
  if (data == nullptr && numel > 0) {
    return Status::InvalidArgument("Tensor::View: null data for " + std::to_string(numel) + " elements of shape " +
                                   ShapeToString(shape));
  }
  if (reinterpret_cast<uintptr_t>(data) % info->size != 0) {
    return Status::InvalidArgument("Tensor::View: data is not aligned to the " + std::to_string(info->size) +
                                   "-byte elements of " + info->name);
  }
  Tensor t;
  t.type_ = type;
  t.shape_ = std::move(shape);
  t.numel_ = numel;
  // Aliasing constructor: points at the caller's memory, owns `owner` (or nothing).
  t.data_ = std::shared_ptr<uint8_t>(std::shared_ptr<const void>(std::move(owner)), static_cast<uint8_t*>(data));
  return t;
}

StatusOr<Tensor> Tensor::Reshaped(Shape new_shape) const {
  if (NumElements(new_shape) != numel_) {
    return Status::InvalidArgument("cannot reshape " + ShapeToString(shape_) + " to " +
                                   ShapeToString(new_shape));
  }
  Tensor t = *this;
  t.shape_ = std::move(new_shape);
  return t;
}

std::string Device::ToString() const {
  std::string s = type == DeviceType::kCuda ? "cuda" : "cpu";
  if (type == DeviceType::kCuda || index != 0) s += ":" + std::to_string(index);
  return s;
}

Tensor Tensor::OnDevice(DataType type, Shape shape, std::shared_ptr<uint8_t> buffer, Device device) {
  Tensor t;
  t.type_ = type;
  t.shape_ = std::move(shape);
  t.numel_ = NumElements(t.shape_);
  t.data_ = std::move(buffer);
  t.device_ = device;
  return t;
}

Tensor Tensor::Clone() const {
  if (!device_.is_host()) return Tensor();
  Tensor t(type_, shape_);
  if (nbytes() > 0) std::memcpy(t.raw_data(), raw_data(), nbytes());
  return t;
}

double Tensor::GetAsDouble(int64_t i) const {
  if (!device_.is_host()) return 0.0;
  const void* p = raw_data();
  switch (type_) {
    case DataType::kFloat32: return LoadAsDouble<float>(p, i);
    case DataType::kFloat64: return LoadAsDouble<double>(p, i);
    case DataType::kInt8: return LoadAsDouble<int8_t>(p, i);
    case DataType::kUInt8: return LoadAsDouble<uint8_t>(p, i);
    case DataType::kInt16: return LoadAsDouble<int16_t>(p, i);
    case DataType::kUInt16: return LoadAsDouble<uint16_t>(p, i);
    case DataType::kInt32: return LoadAsDouble<int32_t>(p, i);
    case DataType::kUInt32: return LoadAsDouble<uint32_t>(p, i);
    case DataType::kInt64: return LoadAsDouble<int64_t>(p, i);
    case DataType::kUInt64: return LoadAsDouble<uint64_t>(p, i);
    case DataType::kBool: return static_cast<const bool*>(p)[i] ? 1.0 : 0.0;
    case DataType::kFloat16: return HalfToFloat(static_cast<const uint16_t*>(p)[i]);
    case DataType::kBFloat16: return BFloat16ToFloat(static_cast<const uint16_t*>(p)[i]);
    case DataType::kInt4: return LoadAsDouble<int8_t>(p, i);
    case DataType::kUInt4: return LoadAsDouble<uint8_t>(p, i);
    case DataType::kFloat8E4M3FN: return Float8E4M3ToFloat(static_cast<const uint8_t*>(p)[i]);
    case DataType::kUndefined: break;
  }
  return 0.0;
}

namespace {

template <typename T>
void StoreFromDouble(void* base, int64_t i, double v) {
  if constexpr (std::is_floating_point_v<T>) {
    static_cast<T*>(base)[i] = static_cast<T>(v);
  } else if constexpr (std::is_same_v<T, bool>) {
    static_cast<bool*>(base)[i] = v != 0.0;
  } else {
    // ONNX Cast from float to int: truncation toward zero; out-of-range is
    // undefined in ONNX, we saturate so the result is at least deterministic.
    if (std::isnan(v)) {
      static_cast<T*>(base)[i] = 0;
      return;
    }
    double t = std::trunc(v);
    constexpr double lo = static_cast<double>(std::numeric_limits<T>::lowest());
    constexpr double hi = static_cast<double>(std::numeric_limits<T>::max());
    if (t <= lo) static_cast<T*>(base)[i] = std::numeric_limits<T>::lowest();
    else if (t >= hi) static_cast<T*>(base)[i] = std::numeric_limits<T>::max();
    else static_cast<T*>(base)[i] = static_cast<T>(t);
  }
}

bool IsInteger(DataType t) {
  const DataTypeInfo* info = GetDataTypeInfo(t);
  return info != nullptr && !info->is_float && t != DataType::kBool;
}

}  // namespace

Tensor Tensor::ToFloat32() const {
  if (!device_.is_host()) return Tensor();
  if (type_ == DataType::kFloat32) return *this;
  return CastTo(DataType::kFloat32);
}

Tensor Tensor::CastTo(DataType type) const {
  if (type == type_ || !device_.is_host()) return Clone();
  Tensor out(type, shape_);
  void* dst = out.raw_data();
  // Integer to integer goes through int64 to keep 64-bit values exact.
  if (IsInteger(type_) && IsInteger(type)) {
    for (int64_t i = 0; i < numel_; ++i) {
      int64_t v = type_ == DataType::kUInt64 ? static_cast<int64_t>(data<uint64_t>()[i])
                  : type_ == DataType::kInt64 ? data<int64_t>()[i]
                                              : static_cast<int64_t>(GetAsDouble(i));
      switch (type) {
        case DataType::kInt8: static_cast<int8_t*>(dst)[i] = static_cast<int8_t>(v); break;
        case DataType::kUInt8: static_cast<uint8_t*>(dst)[i] = static_cast<uint8_t>(v); break;
        case DataType::kInt16: static_cast<int16_t*>(dst)[i] = static_cast<int16_t>(v); break;
        case DataType::kUInt16: static_cast<uint16_t*>(dst)[i] = static_cast<uint16_t>(v); break;
        case DataType::kInt32: static_cast<int32_t*>(dst)[i] = static_cast<int32_t>(v); break;
        case DataType::kUInt32: static_cast<uint32_t*>(dst)[i] = static_cast<uint32_t>(v); break;
        case DataType::kInt64: static_cast<int64_t*>(dst)[i] = v; break;
        case DataType::kUInt64: static_cast<uint64_t*>(dst)[i] = static_cast<uint64_t>(v); break;
        // 4-bit: the low nibble, as ONNX's Cast wraps integers (int4 sign-extended).
        case DataType::kInt4: static_cast<int8_t*>(dst)[i] = static_cast<int8_t>(((v & 0xf) ^ 8) - 8); break;
        case DataType::kUInt4: static_cast<uint8_t*>(dst)[i] = static_cast<uint8_t>(v & 0xf); break;
        default: break;
      }
    }
    return out;
  }
  for (int64_t i = 0; i < numel_; ++i) {
    double v = GetAsDouble(i);
    switch (type) {
      case DataType::kFloat32: StoreFromDouble<float>(dst, i, v); break;
      case DataType::kFloat64: StoreFromDouble<double>(dst, i, v); break;
      case DataType::kInt8: StoreFromDouble<int8_t>(dst, i, v); break;
      case DataType::kUInt8: StoreFromDouble<uint8_t>(dst, i, v); break;
      case DataType::kInt16: StoreFromDouble<int16_t>(dst, i, v); break;
      case DataType::kUInt16: StoreFromDouble<uint16_t>(dst, i, v); break;
      case DataType::kInt32: StoreFromDouble<int32_t>(dst, i, v); break;
      case DataType::kUInt32: StoreFromDouble<uint32_t>(dst, i, v); break;
      case DataType::kInt64: StoreFromDouble<int64_t>(dst, i, v); break;
      case DataType::kUInt64: StoreFromDouble<uint64_t>(dst, i, v); break;
      case DataType::kBool: StoreFromDouble<bool>(dst, i, v); break;
      case DataType::kFloat16:
        static_cast<uint16_t*>(dst)[i] = FloatToHalf(static_cast<float>(v));
        break;
      case DataType::kBFloat16:
        static_cast<uint16_t*>(dst)[i] = FloatToBFloat16(static_cast<float>(v));
        break;
      case DataType::kInt4:  // float to 4-bit: truncate, saturate to the type's range
        static_cast<int8_t*>(dst)[i] = static_cast<int8_t>(std::isnan(v) ? 0 : std::clamp(std::trunc(v), -8.0, 7.0));
        break;
      case DataType::kUInt4:
        static_cast<uint8_t*>(dst)[i] = static_cast<uint8_t>(std::isnan(v) ? 0 : std::clamp(std::trunc(v), 0.0, 15.0));
        break;
      case DataType::kFloat8E4M3FN:  // ONNX Cast's default: saturate=1
        static_cast<uint8_t*>(dst)[i] = FloatToFloat8E4M3(static_cast<float>(v), /*saturate=*/true);
        break;
      case DataType::kUndefined: break;
    }
  }
  return out;
}

std::vector<int64_t> Tensor::ToInt64Vector() const {
  if (!device_.is_host()) return {};
  std::vector<int64_t> v(static_cast<size_t>(numel_));
  // An empty tensor has no buffer, and memcpy wants non-null pointers even for 0 bytes.
  if (type_ == DataType::kInt64) {
    if (nbytes() > 0) std::memcpy(v.data(), raw_data(), nbytes());
  } else {
    for (int64_t i = 0; i < numel_; ++i) v[i] = static_cast<int64_t>(GetAsDouble(i));
  }
  return v;
}

bool Tensor::Equals(const Tensor& other) const {
  if (type_ != other.type_ || shape_ != other.shape_ || !device_.is_host() || !other.device_.is_host()) return false;
  return nbytes() == 0 || std::memcmp(raw_data(), other.raw_data(), nbytes()) == 0;
}

}  // namespace sparq
