// Every fast CPU kernel (kernels/cpu) x every ISA this CPU has x odd and even
// shapes, against the reference kernels (kernels/ref): INT8 results must be
// identical, FP32 results within kF32RelTol of the largest reference value.
// Also: the packed formats (round trips, statistics, N:M rejection), the
// dispatch table and argument errors.
//
// To add a case: add a shape to the lists below; to add a kernel: add its row
// to kernels/cpu/dispatch.cc; EveryTableRowIsExercised then runs it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/packed_formats.h"
#include "kernels/parallel.h"
#include "kernels/ref/gemm.h"
#include "kernels/ref/gemm_int.h"
#include "kernels/ref/quantize.h"
#include "tests/kernels/cpu_row_kernels.h"
#include "tests/kernels/isa_sweep.h"

namespace sparq {
namespace {

// FP32: |fast - ref| <= kF32RelTol * max |ref| (the kernels sum in another order, with FMA).
// INT8: int32 accumulators and requantized outputs are compared for equality (no tolerance).
using testing::kF32RelTol;

struct Shape {
  int64_t m, n, k;
};
std::string ToString(const Shape& s) {
  return "M=" + std::to_string(s.m) + " N=" + std::to_string(s.n) + " K=" + std::to_string(s.k);
}

// Dense shapes: tails of every register tile (8/6/4 rows, 16/32 columns, k steps of 2/4)
// and of the cache blocks (512 columns, 512 k, 128 rows).
const std::vector<Shape> kGemmShapes = {{1, 1, 1},    {1, 17, 3},   {7, 5, 1},    {3, 4, 0},     {13, 33, 31},
                                        {37, 50, 67}, {64, 64, 64}, {9, 48, 513}, {5, 530, 20},  {150, 20, 9},
                                        {2, 16, 4},   {1, 530, 1037}, {1, 50, 13},  {1, 33, 520}};
// Sparse shapes: tails of the M tiles (8..64 lanes), the block grid and K;
// N = 530 makes the INT8 kernel flush its row-major output slab more than once.
const std::vector<Shape> kSpmmShapes = {{1, 1, 1},    {1, 5, 3},     {3, 1, 7},    {17, 9, 13},   {33, 20, 37},
                                        {64, 64, 64}, {70, 33, 130}, {5, 40, 600}, {130, 17, 19}, {70, 530, 21}};
const std::vector<double> kDensities = {0.0, 0.1, 0.5, 1.0};

class IsaTest : public testing::IsaSweepTest {
 protected:
  // The ISA the kernel that runs `format` must have: the highest-priority row at or below the forced ISA.
  CpuIsa ExpectedIsa(CpuOp op, PackedFormat format) const {
    const CpuKernelDef* def = SelectCpuKernelAt(op, format, GetParam());
    return def != nullptr ? def->isa : CpuIsa::kPortable;
  }
};

// Uniform in +-[0.1, 1]: no zeros, no tiny values.
float RandomNonzero(std::mt19937& rng) {
  std::uniform_real_distribution<float> mag(0.1f, 1.0f);
  return (rng() & 1) ? mag(rng) : -mag(rng);
}

template <typename T>
T RandomInt(std::mt19937& rng, int32_t lo, int32_t hi, int32_t avoid) {
  std::uniform_int_distribution<int32_t> d(lo, hi);
  int32_t v;
  do v = d(rng);
  while (v == avoid);  // x - zero point is never 0, so no term vanishes
  return static_cast<T>(v);
}

float MaxAbs(const std::vector<float>& v) {
  float m = 0.0f;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

// Checks fast against ref elementwise with the FP32 tolerance.
void ExpectNearF32(const std::vector<float>& ref, const std::vector<float>& fast, const std::string& what) {
  ASSERT_EQ(ref.size(), fast.size()) << what;
  const float tol = kF32RelTol * MaxAbs(ref);
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_LE(std::fabs(ref[i] - fast[i]), tol) << what << ": element " << i << " ref " << ref[i] << " got "
                                                << fast[i];
  }
}

// A dense [rows, cols] weight matrix with blocks of br x bc kept with
// probability `density`; kept blocks hold nonzero values except ~10% zeros.
template <typename T>
std::vector<T> RandomBlockSparse(std::mt19937& rng, int64_t rows, int64_t cols, int br, int bc, double density) {
  std::vector<T> w(static_cast<size_t>(rows * cols), T(0));
  std::bernoulli_distribution keep(density), hole(0.1);
  for (int64_t r = 0; r < rows; r += br) {
    for (int64_t c = 0; c < cols; c += bc) {
      if (!keep(rng)) continue;
      for (int64_t i = r; i < std::min(rows, r + br); ++i)
        for (int64_t j = c; j < std::min(cols, c + bc); ++j) {
          if (hole(rng)) continue;
          if constexpr (std::is_same<T, float>::value) {
            w[i * cols + j] = RandomNonzero(rng);
          } else {
            w[i * cols + j] = RandomInt<T>(rng, -128, 127, 0);
          }
        }
    }
  }
  return w;
}

// A dense [rows, cols] matrix that is N:M sparse: per group of `group`
// columns, a random count in [0, keep] of random positions are nonzero.
template <typename T = float>
std::vector<T> RandomNm(std::mt19937& rng, int64_t rows, int64_t cols, int group, int keep) {
  std::vector<T> w(static_cast<size_t>(rows * cols), T(0));
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t k0 = 0; k0 < cols; k0 += group) {
      const int width = static_cast<int>(std::min<int64_t>(group, cols - k0));
      std::vector<int> pos(width);
      for (int j = 0; j < width; ++j) pos[j] = j;
      std::shuffle(pos.begin(), pos.end(), rng);
      const int count = std::min(width, static_cast<int>(rng() % (keep + 1)));
      for (int t = 0; t < count; ++t) {
        if constexpr (std::is_same<T, float>::value) {
          w[n * cols + k0 + pos[t]] = RandomNonzero(rng);
        } else {
          w[n * cols + k0 + pos[t]] = RandomInt<T>(rng, -128, 127, 0);
        }
      }
    }
  }
  return w;
}

std::vector<float> Transpose(const std::vector<float>& a, int64_t rows, int64_t cols) {
  std::vector<float> t(a.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) t[j * rows + i] = a[i * cols + j];
  return t;
}

// Reference Y[M, N] = X[M, K] * W^T + bias.
std::vector<float> RefLinearF32(const std::vector<float>& x, const std::vector<float>& w, const float* bias,
                                const Shape& s) {
  std::vector<float> y(static_cast<size_t>(s.m * s.n), 0.0f);
  GemmF32Ref(false, true, s.m, s.n, s.k, 1.0f, x.data(), std::max<int64_t>(1, s.k), w.data(),
             std::max<int64_t>(1, s.k), 0.0f, y.data(), std::max<int64_t>(1, s.n), nullptr);
  if (bias != nullptr)
    for (int64_t m = 0; m < s.m; ++m)
      for (int64_t n = 0; n < s.n; ++n) y[m * s.n + n] += bias[n];
  return y;
}

// Runs a FP32 sparse kernel in `layout` with padded strides and returns Y [M, N].
template <typename Args, typename W>
std::vector<float> RunSpmmF32(Status (*run)(const Args&, const char**), const W& w, const std::vector<float>& x,
                              const float* bias, const Shape& s, SpmmLayout layout, const char** name) {
  Args args;
  args.layout = layout;
  args.m = s.m;
  args.w = &w;
  args.bias = bias;
  std::vector<float> x_stored, y_stored;
  int64_t x_rows, x_cols, y_rows, y_cols;
  if (layout == SpmmLayout::kRowMajor) {
    x_rows = s.m, x_cols = s.k, y_rows = s.m, y_cols = s.n;
  } else {
    x_rows = s.k, x_cols = s.m, y_rows = s.n, y_cols = s.m;
  }
  const std::vector<float> xl = layout == SpmmLayout::kRowMajor ? x : Transpose(x, s.m, s.k);
  args.ld_x = x_cols + 3;
  args.ld_y = y_cols + 2;
  x_stored.assign(static_cast<size_t>(x_rows * args.ld_x), NAN);  // padding must never be read
  for (int64_t i = 0; i < x_rows; ++i)
    for (int64_t j = 0; j < x_cols; ++j) x_stored[i * args.ld_x + j] = xl[i * x_cols + j];
  y_stored.assign(static_cast<size_t>(y_rows * args.ld_y), -7.0f);
  args.x = x_stored.data();
  args.y = y_stored.data();
  Status st = run(args, name);
  EXPECT_TRUE(st.ok()) << st.ToString();
  std::vector<float> y(static_cast<size_t>(y_rows * y_cols));
  for (int64_t i = 0; i < y_rows; ++i) {
    for (int64_t j = 0; j < y_cols; ++j) y[i * y_cols + j] = y_stored[i * args.ld_y + j];
    for (int64_t j = y_cols; j < args.ld_y; ++j) EXPECT_EQ(y_stored[i * args.ld_y + j], -7.0f) << "wrote padding";
  }
  return layout == SpmmLayout::kRowMajor ? y : Transpose(y, s.n, s.m);
}

// ---------------------------------------------------------------------------
// FP32 BSR

void CheckSpmmBsrF32(std::mt19937& rng, PackedFormat format, const Shape& s, double density, SpmmLayout layout,
                     bool with_bias, const std::string& expected_name_suffix, std::set<std::string>* ran) {
  const PackedFormatTraits& t = Traits(format);
  const std::string what = std::string(t.name) + " " + ToString(s) + " density " + std::to_string(density) +
                           (layout == SpmmLayout::kRowMajor ? " row-major" : " transposed") +
                           (with_bias ? " +bias" : "");
  SCOPED_TRACE(what);
  std::vector<float> w = RandomBlockSparse<float>(rng, s.n, s.k, t.block_rows, t.block_cols, density);
  std::vector<float> x(static_cast<size_t>(s.m * s.k));
  for (float& v : x) v = RandomNonzero(rng);
  std::vector<float> bias(static_cast<size_t>(s.n));
  for (float& v : bias) v = RandomNonzero(rng);
  StatusOr<BsrF32> packed = PackBsr(w.data(), s.n, s.k, format);
  ASSERT_TRUE(packed.ok()) << packed.status().ToString();
  ASSERT_EQ(UnpackBsr(*packed), w) << "pack/unpack round trip";
  const char* name = nullptr;
  std::vector<float> y = RunSpmmF32(&RunSpmmBsrF32, *packed, x, with_bias ? bias.data() : nullptr, s, layout, &name);
  ASSERT_NE(name, nullptr);
  EXPECT_TRUE(std::string(name).find(expected_name_suffix) != std::string::npos) << name;
  if (ran != nullptr) ran->insert(name);
  ExpectNearF32(RefLinearF32(x, w, with_bias ? bias.data() : nullptr, s), y, what);
}

constexpr PackedFormat kBsrF32Formats[] = {PackedFormat::kBsr1x4F32, PackedFormat::kBsr4x1F32,
                                           PackedFormat::kBsr4x4F32, PackedFormat::kBsr8x8F32,
                                           PackedFormat::kBsr16x16F32};
constexpr PackedFormat kBsrS8Formats[] = {PackedFormat::kBsr1x4S8, PackedFormat::kBsr4x1S8, PackedFormat::kBsr4x4S8,
                                          PackedFormat::kBsr8x8S8, PackedFormat::kBsr16x16S8};

TEST_P(IsaTest, SpmmBsrF32MatchesReference) {
  std::mt19937 rng(101);
  for (PackedFormat f : kBsrF32Formats) {
    const std::string suffix = std::string("_f32_") + CpuIsaName(ExpectedIsa(CpuOp::kSpmmBsrF32, f));
    for (const Shape& s : kSpmmShapes)
      for (double d : kDensities)
        for (SpmmLayout layout : {SpmmLayout::kRowMajor, SpmmLayout::kTransposed})
          CheckSpmmBsrF32(rng, f, s, d, layout, /*with_bias=*/d == 0.5, suffix, nullptr);
  }
}

// ---------------------------------------------------------------------------
// FP32 N:M

void CheckSpmmNmF32(std::mt19937& rng, PackedFormat format, const Shape& s, SpmmLayout layout, bool with_bias,
                    const std::string& expected_name_suffix, std::set<std::string>* ran) {
  const PackedFormatTraits& t = Traits(format);
  const std::string what = std::string(t.name) + " " + ToString(s) +
                           (layout == SpmmLayout::kRowMajor ? " row-major" : " transposed");
  SCOPED_TRACE(what);
  std::vector<float> w = RandomNm(rng, s.n, s.k, t.block_cols, t.nm_keep);
  std::vector<float> x(static_cast<size_t>(s.m * s.k));
  for (float& v : x) v = RandomNonzero(rng);
  std::vector<float> bias(static_cast<size_t>(s.n));
  for (float& v : bias) v = RandomNonzero(rng);
  StatusOr<NmF32> packed = PackNm(w.data(), s.n, s.k, format);
  ASSERT_TRUE(packed.ok()) << packed.status().ToString();
  ASSERT_EQ(UnpackNm(*packed), w) << "pack/unpack round trip";
  const char* name = nullptr;
  std::vector<float> y = RunSpmmF32(&RunSpmmNmF32, *packed, x, with_bias ? bias.data() : nullptr, s, layout, &name);
  ASSERT_NE(name, nullptr);
  EXPECT_TRUE(std::string(name).find(expected_name_suffix) != std::string::npos) << name;
  if (ran != nullptr) ran->insert(name);
  ExpectNearF32(RefLinearF32(x, w, with_bias ? bias.data() : nullptr, s), y, what);
}

TEST_P(IsaTest, SpmmNmF32MatchesReference) {
  std::mt19937 rng(202);
  for (PackedFormat f : {PackedFormat::kNm2of4F32, PackedFormat::kNm4of8F32}) {
    const std::string suffix = std::string("_f32_") + CpuIsaName(ExpectedIsa(CpuOp::kSpmmNmF32, f));
    for (const Shape& s : kSpmmShapes)
      for (SpmmLayout layout : {SpmmLayout::kRowMajor, SpmmLayout::kTransposed})
        CheckSpmmNmF32(rng, f, s, layout, s.m % 2 == 1, suffix, nullptr);
  }
}

// ---------------------------------------------------------------------------
// INT8: epilogue parameters and the reference output.

struct S8Case {
  bool a_signed = false;    // activations int8 (else uint8)
  bool w_unsigned = false;  // dense GEMM weights uint8 (else int8)
  bool a_zp_per_row = false;
  bool w_zp_per_channel = false;
  bool out_signed = true;
  bool per_channel_requant = true;
  bool with_bias = true;
  bool bias_per_channel = true;  // false: one bias for every channel
  bool relu = false;
  std::string Describe() const {
    return std::string(a_signed ? "A s8" : "A u8") + (w_unsigned ? " W u8" : " W s8") +
           (a_zp_per_row ? " a_zp/row" : " a_zp/tensor") + (w_zp_per_channel ? " w_zp/ch" : " w_zp/tensor") +
           (out_signed ? " out s8" : " out u8") + (per_channel_requant ? " requant/ch" : " requant/tensor") +
           (with_bias ? (bias_per_channel ? " +bias/ch" : " +bias/tensor") : "") + (relu ? " relu" : "");
  }
};

std::vector<S8Case> S8Cases() {
  std::vector<S8Case> cases;
  for (int i = 0; i < 8; ++i) {
    S8Case c;
    c.a_signed = i & 1;
    c.w_unsigned = (i >> 1) & 1;
    c.a_zp_per_row = (i >> 2) & 1;
    c.w_zp_per_channel = !c.a_zp_per_row;
    c.out_signed = (i % 3) != 0;
    c.per_channel_requant = i % 2 == 0;
    c.with_bias = i != 3;
    c.bias_per_channel = i % 3 != 2;
    c.relu = i % 4 == 1;
    cases.push_back(c);
  }
  return cases;
}

// Requantization parameters scaled so that outputs span the type, some saturating.
struct Requant {
  std::vector<int32_t> bias;
  std::vector<float> multiplier;
  int32_t zero_point = 0;
};

// True when float32(acc + bias) * multiplier, as RequantizeS32Ref forms it, is
// exactly halfway between two integers.
bool IsRoundingTie(int32_t acc, int32_t bias, float multiplier) {
  const int32_t sum = static_cast<int32_t>(static_cast<uint32_t>(acc) + static_cast<uint32_t>(bias));
  const float real = static_cast<float>(sum) * multiplier;
  return std::fabs(real - std::trunc(real)) == 0.5f;
}

// `acc` is [rows, channels] (channel = column). The random cases avoid rounding
// ties: a mismatch there then points at the kernel, not at a tie; the tie rule
// itself is tested on purpose in cpu_requant_test.cc.
Requant MakeRequant(std::mt19937& rng, const S8Case& c, int64_t channels, const std::vector<int32_t>& acc) {
  Requant q;
  int64_t max_acc = 1;
  for (int32_t v : acc) max_acc = std::max<int64_t>(max_acc, std::llabs(static_cast<int64_t>(v)));
  std::uniform_real_distribution<float> spread(0.4f, 2.5f);
  std::uniform_int_distribution<int32_t> bias(-static_cast<int32_t>(max_acc / 4), static_cast<int32_t>(max_acc / 4));
  q.multiplier.resize(c.per_channel_requant ? channels : 1);
  q.bias.resize(channels);
  for (int attempt = 0;; ++attempt) {
    for (float& m : q.multiplier) m = 90.0f / static_cast<float>(max_acc) * spread(rng);
    for (int32_t& b : q.bias) b = bias(rng);
    bool tie = false;
    for (size_t i = 0; i < acc.size() && !tie; ++i) {
      const int64_t n = static_cast<int64_t>(i) % std::max<int64_t>(1, channels);
      const int32_t b = c.with_bias ? q.bias[c.bias_per_channel ? n : 0] : 0;
      tie = IsRoundingTie(acc[i], b, q.multiplier[c.per_channel_requant ? n : 0]);
    }
    if (!tie) break;
    EXPECT_LT(attempt, 100) << "could not draw requantization parameters without a rounding tie";
    if (attempt >= 100) break;
  }
  q.zero_point = c.out_signed ? static_cast<int32_t>(rng() % 21) - 10 : static_cast<int32_t>(rng() % 60) + 100;
  return q;
}

// Reference requantization of acc [rows, cols] with channel = column (or row when channel_is_row).
std::vector<int8_t> RefRequant(const S8Case& c, const Requant& q, const std::vector<int32_t>& acc, int64_t rows,
                               int64_t cols, bool channel_is_row) {
  std::vector<int8_t> out(acc.size());
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t* a = acc.data() + r * cols;
    const int64_t ch = channel_is_row ? r : 0;
    const int32_t* bias = c.with_bias ? q.bias.data() + (c.bias_per_channel ? ch : 0) : nullptr;
    const float* mult = q.multiplier.data() + (c.per_channel_requant ? ch : 0);
    const int64_t bias_stride = channel_is_row || !c.bias_per_channel ? 0 : 1;
    const int64_t mult_stride = channel_is_row || !c.per_channel_requant ? 0 : 1;
    if (c.out_signed) {
      RequantizeS32Ref<int8_t>(cols, a, bias, bias_stride, mult, mult_stride, q.zero_point, c.relu,
                               out.data() + r * cols);
    } else {
      RequantizeS32Ref<uint8_t>(cols, a, bias, bias_stride, mult, mult_stride, q.zero_point, c.relu,
                                reinterpret_cast<uint8_t*>(out.data()) + r * cols);
    }
  }
  return out;
}

void SetEpilogue(const S8Case& c, const Requant& q, int32_t* s32, int64_t ld_s32, int8_t* out_q, int64_t ld_q,
                 S8Epilogue* e) {
  e->out_s32 = s32;
  e->ld_s32 = ld_s32;
  e->out_q = out_q;
  e->ld_q = ld_q;
  e->out_q_signed = c.out_signed;
  e->bias = c.with_bias ? q.bias.data() : nullptr;
  e->bias_per_channel = c.bias_per_channel;
  e->multiplier = q.multiplier.data();
  e->multiplier_per_channel = c.per_channel_requant;
  e->zero_point = q.zero_point;
  e->fuse_relu = c.relu;
}

// ---------------------------------------------------------------------------
// INT8 dense GEMM

template <typename TA, typename TW>
void CheckGemmS8Typed(std::mt19937& rng, const S8Case& c, const Shape& s, PackedFormat format,
                      const std::string& expected_name, std::set<std::string>* ran) {
  constexpr int32_t a_lo = std::is_same<TA, int8_t>::value ? -128 : 0, a_hi = a_lo + 255;
  constexpr int32_t w_lo = std::is_same<TW, int8_t>::value ? -128 : 0, w_hi = w_lo + 255;
  std::vector<int32_t> a_zp(c.a_zp_per_row ? std::max<int64_t>(1, s.m) : 1), w_zp(c.w_zp_per_channel ? s.n : 1);
  for (int32_t& z : a_zp) z = RandomInt<int32_t>(rng, a_lo, a_hi, a_hi + 1);
  for (int32_t& z : w_zp) z = RandomInt<int32_t>(rng, w_lo, w_hi, w_hi + 1);
  const GemmZeroPoints azp{a_zp.data(), c.a_zp_per_row}, wzp{w_zp.data(), c.w_zp_per_channel};
  const int64_t lda = s.k + 5;
  std::vector<TA> a(static_cast<size_t>(std::max<int64_t>(1, s.m * lda)));
  for (int64_t m = 0; m < s.m; ++m)
    for (int64_t k = 0; k < lda; ++k) a[m * lda + k] = RandomInt<TA>(rng, a_lo, a_hi, azp.at(m));
  std::vector<TW> w(static_cast<size_t>(s.n * s.k)), wt(static_cast<size_t>(s.n * s.k));
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t k = 0; k < s.k; ++k) wt[k * s.n + n] = w[n * s.k + k] = RandomInt<TW>(rng, w_lo, w_hi, wzp.at(n));

  std::vector<int32_t> ref(static_cast<size_t>(s.m * s.n));
  GemmS32Ref<TA, TW>(s.m, s.n, s.k, a.data(), lda, azp, wt.data(), s.n, wzp, ref.data(), s.n);
  const Requant q = MakeRequant(rng, c, s.n, ref);
  const std::vector<int8_t> ref_q = RefRequant(c, q, ref, s.m, s.n, false);

  StatusOr<PackedGemmS8> packed = PackGemmS8(w.data(), s.n, s.k, wzp, format);
  ASSERT_TRUE(packed.ok()) << packed.status().ToString();
  GemmS8Args args;
  args.m = s.m;
  args.a = a.data();
  args.a_signed = std::is_same<TA, int8_t>::value;
  args.lda = lda;
  args.a_zp = azp;
  args.b = &*packed;
  // Outputs with padded rows (ld = N + 3 / N + 5): the padding must stay untouched.
  const int64_t ld_s32 = s.n + 3, ld_q = s.n + 5;
  std::vector<int32_t> got(static_cast<size_t>(s.m * ld_s32), 12345);
  std::vector<int8_t> got_q(static_cast<size_t>(s.m * ld_q), 77);
  SetEpilogue(c, q, got.data(), ld_s32, got_q.data(), ld_q, &args.out);
  const char* name = nullptr;
  Status st = RunGemmS8(args, &name);
  ASSERT_TRUE(st.ok()) << st.ToString();
  if (s.m > 0 && s.n > 0) {
    ASSERT_NE(name, nullptr);
    EXPECT_EQ(std::string(name), expected_name);
    if (ran != nullptr) ran->insert(name);
  }
  for (int64_t m = 0; m < s.m; ++m) {
    for (int64_t n = 0; n < s.n; ++n) {
      ASSERT_EQ(got[m * ld_s32 + n], ref[m * s.n + n]) << "int32 element (" << m << ", " << n << ")";
      ASSERT_EQ(got_q[m * ld_q + n], ref_q[m * s.n + n]) << "requantized element (" << m << ", " << n << ")";
    }
    for (int64_t n = s.n; n < ld_s32; ++n) ASSERT_EQ(got[m * ld_s32 + n], 12345) << "wrote int32 padding";
    for (int64_t n = s.n; n < ld_q; ++n) ASSERT_EQ(got_q[m * ld_q + n], 77) << "wrote int8 padding";
  }
}

void CheckGemmS8(std::mt19937& rng, const S8Case& c, const Shape& s, PackedFormat format,
                 const std::string& expected_name, std::set<std::string>* ran) {
  SCOPED_TRACE(c.Describe() + " " + ToString(s) + " " + Traits(format).name);
  if (c.a_signed && c.w_unsigned) CheckGemmS8Typed<int8_t, uint8_t>(rng, c, s, format, expected_name, ran);
  if (c.a_signed && !c.w_unsigned) CheckGemmS8Typed<int8_t, int8_t>(rng, c, s, format, expected_name, ran);
  if (!c.a_signed && c.w_unsigned) CheckGemmS8Typed<uint8_t, uint8_t>(rng, c, s, format, expected_name, ran);
  if (!c.a_signed && !c.w_unsigned) CheckGemmS8Typed<uint8_t, int8_t>(rng, c, s, format, expected_name, ran);
}

std::string KernelNameFor(CpuOp op, PackedFormat format) {
  const CpuKernelDef* def = SelectCpuKernel(op, format);
  return def == nullptr ? "(none)" : def->name;
}

TEST_P(IsaTest, GemmS8MatchesReferenceExactly) {
  std::mt19937 rng(303);
  const PackedFormat format = PreferredGemmS8Format(GetParam());
  const std::string name = KernelNameFor(CpuOp::kGemmS8, format);
  EXPECT_NE(name.find(CpuIsaName(ExpectedIsa(CpuOp::kGemmS8, format))), std::string::npos) << name;
  for (const S8Case& c : S8Cases())
    for (const Shape& s : kGemmShapes) CheckGemmS8(rng, c, s, format, name, nullptr);
}

// Sums past 2^31 wrap mod 2^32 in every kernel, as in GemmS32Ref.
TEST_P(IsaTest, GemmS8WrapsLikeReference) {
  std::mt19937 rng(304);
  S8Case c;
  c.a_signed = false;
  c.w_unsigned = true;
  for (const Shape& s : {Shape{3, 18, 40000}, Shape{1, 50, 40000}}) {  // 255 * 255 * 40000 > 2^31; M = 1: the row tile
    SCOPED_TRACE(ToString(s));
    const PackedFormat format = PreferredGemmS8Format(GetParam());
    std::vector<uint8_t> a(static_cast<size_t>(s.m * s.k), 255), w(static_cast<size_t>(s.n * s.k), 255);
    int32_t zero = 0;
    const GemmZeroPoints zp{&zero, false};
    std::vector<int32_t> ref(static_cast<size_t>(s.m * s.n));
    GemmS32Ref<uint8_t, uint8_t>(s.m, s.n, s.k, a.data(), s.k, zp, w.data(), s.n, zp, ref.data(), s.n);
    ASSERT_LT(ref[0], 0) << "the test should overflow int32";
    StatusOr<PackedGemmS8> packed = PackGemmS8(w.data(), s.n, s.k, zp, format);
    ASSERT_TRUE(packed.ok());
    GemmS8Args args;
    args.m = s.m;
    args.a = a.data();
    args.lda = s.k;
    args.a_zp = zp;
    args.b = &*packed;
    std::vector<int32_t> got(ref.size());
    args.out.out_s32 = got.data();
    args.out.ld_s32 = s.n;
    ASSERT_TRUE(RunGemmS8(args).ok());
    EXPECT_EQ(got, ref);
  }
}

// ---------------------------------------------------------------------------
// INT8 sparse: BSR and N:M weights (the format's kind picks the kernel)

// Packs w and runs the INT8 sparse kernel of `format` with the fields of `args`.
template <typename Args>
Status RunSpmmS8(const std::vector<int8_t>& w, const Shape& s, PackedFormat format, Args args, const char** name) {
  if (Traits(format).kind == LayoutKind::kNm) {
    StatusOr<NmS8> packed = PackNm(w.data(), s.n, s.k, format);
    if (!packed.ok()) return packed.status();
    if (UnpackNm(*packed) != w) return Status::Internal("N:M pack/unpack round trip");
    // Every other call passes the weights prepacked (PrepackSpmmNmS8), so both ways are checked.
    static int calls = 0;
    StatusOr<NmS8Panels> panels = PrepackSpmmNmS8(*packed);
    if (!panels.ok()) return panels.status();
    SpmmNmS8Args a;
    a.panels = calls++ % 2 == 1 ? &*panels : nullptr;
    a.layout = args.layout, a.m = args.m, a.x = args.x, a.x_signed = args.x_signed, a.ld_x = args.ld_x;
    a.x_zero_point = args.x_zero_point, a.w = &*packed, a.out = args.out, a.pool = args.pool;
    return RunSpmmNmS8(a, name);
  }
  StatusOr<BsrS8> packed = PackBsr(w.data(), s.n, s.k, format);
  if (!packed.ok()) return packed.status();
  if (UnpackBsr(*packed) != w) return Status::Internal("BSR pack/unpack round trip");
  args.w = &*packed;
  return RunSpmmBsrS8(args, name);
}

template <typename TX>
void CheckSpmmS8Typed(std::mt19937& rng, const S8Case& c, PackedFormat format, const Shape& s, double density,
                         SpmmLayout layout, const std::string& expected_suffix, std::set<std::string>* ran,
                      ThreadPool* pool = nullptr) {
  const PackedFormatTraits& t = Traits(format);
  constexpr int32_t x_lo = std::is_same<TX, int8_t>::value ? -128 : 0, x_hi = x_lo + 255;
  const int32_t x_zp = RandomInt<int32_t>(rng, x_lo, x_hi, x_hi + 1);
  std::vector<TX> x(static_cast<size_t>(s.m * s.k));
  for (TX& v : x) v = RandomInt<TX>(rng, x_lo, x_hi, x_zp);
  // N:M: `density` is unused (every group keeps a random count in [0, N]).
  std::vector<int8_t> w = t.kind == LayoutKind::kNm
                              ? RandomNm<int8_t>(rng, s.n, s.k, t.block_cols, t.nm_keep)
                              : RandomBlockSparse<int8_t>(rng, s.n, s.k, t.block_rows, t.block_cols, density);
  std::vector<int8_t> wt(w.size());
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t k = 0; k < s.k; ++k) wt[k * s.n + n] = w[n * s.k + k];
  std::vector<int32_t> ref(static_cast<size_t>(s.m * s.n));
  GemmS32Ref<TX, int8_t>(s.m, s.n, s.k, x.data(), std::max<int64_t>(1, s.k), GemmZeroPoints{&x_zp, false}, wt.data(),
                         s.n, GemmZeroPoints{}, ref.data(), s.n);
  const Requant q = MakeRequant(rng, c, s.n, ref);
  const bool row_major = layout == SpmmLayout::kRowMajor;
  // Compare in the layout the kernel writes: Y [M, N] or Y^T [N, M].
  std::vector<int32_t> ref_l = ref;
  if (!row_major)
    for (int64_t m = 0; m < s.m; ++m)
      for (int64_t n = 0; n < s.n; ++n) ref_l[n * s.m + m] = ref[m * s.n + n];
  const int64_t out_rows = row_major ? s.m : s.n, out_cols = row_major ? s.n : s.m;
  const std::vector<int8_t> ref_q = RefRequant(c, q, ref_l, out_rows, out_cols, !row_major);

  // X as stored, rows padded by 3 values that must never be read (random, so a read shows).
  const int64_t x_cols = row_major ? s.k : s.m, ld_x = x_cols + 3;
  std::vector<TX> x_l(static_cast<size_t>((row_major ? s.m : s.k) * ld_x));
  for (TX& v : x_l) v = RandomInt<TX>(rng, x_lo, x_hi, x_hi + 1);
  for (int64_t m = 0; m < s.m; ++m)
    for (int64_t k = 0; k < s.k; ++k) x_l[row_major ? m * ld_x + k : k * ld_x + m] = x[m * s.k + k];
  SpmmBsrS8Args args;
  args.layout = layout;
  args.m = s.m;
  args.x = x_l.data();
  args.x_signed = std::is_same<TX, int8_t>::value;
  args.ld_x = ld_x;
  args.x_zero_point = x_zp;
  args.pool = pool;
  const int64_t ld_s32 = out_cols + 2, ld_q = out_cols + 7;
  std::vector<int32_t> got(static_cast<size_t>(out_rows * ld_s32), 12345);
  std::vector<int8_t> got_q(static_cast<size_t>(out_rows * ld_q), 77);
  SetEpilogue(c, q, got.data(), ld_s32, got_q.data(), ld_q, &args.out);
  const char* name = nullptr;
  Status st = RunSpmmS8(w, s, format, args, &name);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_NE(name, nullptr);
  EXPECT_NE(std::string(name).find(expected_suffix), std::string::npos) << name;
  if (ran != nullptr) ran->insert(name);
  for (int64_t r = 0; r < out_rows; ++r) {
    for (int64_t j = 0; j < out_cols; ++j) {
      ASSERT_EQ(got[r * ld_s32 + j], ref_l[r * out_cols + j]) << "int32 element (" << r << ", " << j << ")";
      ASSERT_EQ(got_q[r * ld_q + j], ref_q[r * out_cols + j]) << "requantized element (" << r << ", " << j << ")";
    }
    for (int64_t j = out_cols; j < ld_s32; ++j) ASSERT_EQ(got[r * ld_s32 + j], 12345) << "wrote int32 padding";
    for (int64_t j = out_cols; j < ld_q; ++j) ASSERT_EQ(got_q[r * ld_q + j], 77) << "wrote int8 padding";
  }
}

void CheckSpmmS8(std::mt19937& rng, const S8Case& c, PackedFormat format, const Shape& s, double density,
                    SpmmLayout layout, const std::string& expected_suffix, std::set<std::string>* ran,
                      ThreadPool* pool = nullptr) {
  SCOPED_TRACE(c.Describe() + " " + Traits(format).name + " " + ToString(s) + " density " + std::to_string(density) +
               (layout == SpmmLayout::kRowMajor ? " row-major" : " transposed"));
  if (c.a_signed) {
    CheckSpmmS8Typed<int8_t>(rng, c, format, s, density, layout, expected_suffix, ran, pool);
  } else {
    CheckSpmmS8Typed<uint8_t>(rng, c, format, s, density, layout, expected_suffix, ran, pool);
  }
}

TEST_P(IsaTest, SpmmBsrS8MatchesReferenceExactly) {
  std::mt19937 rng(404);
  const std::vector<S8Case> cases = S8Cases();
  int case_index = 0;
  for (PackedFormat f : kBsrS8Formats) {
    const std::string suffix = std::string("_s8_") + CpuIsaName(ExpectedIsa(CpuOp::kSpmmBsrS8, f));
    for (const Shape& s : kSpmmShapes)
      for (double d : {0.1, 0.5, 1.0})
        for (SpmmLayout layout : {SpmmLayout::kRowMajor, SpmmLayout::kTransposed})
          CheckSpmmS8(rng, cases[case_index++ % cases.size()], f, s, d, layout, suffix, nullptr);
  }
}

// N:M INT8: 2:4 and 4:8, K not a multiple of 8 (odd group counts, narrow last
// groups), M not a multiple of the 4-row tile, N not a multiple of 16 / 64, and
// several thread counts (tasks split channels, then activation rows).
TEST_P(IsaTest, SpmmNmS8MatchesReferenceExactly) {
  std::mt19937 rng(406);
  const std::vector<S8Case> cases = S8Cases();
  const std::vector<Shape> shapes = {{1, 1, 1},   {1, 5, 3},    {3, 1, 7},     {17, 9, 13},  {33, 20, 37},
                                     {64, 64, 64}, {70, 33, 130}, {5, 40, 600}, {130, 17, 19}, {70, 530, 21},
                                     {6, 70, 12},  {9, 200, 300}};
  ThreadPool pool2(2), pool3(3);
  ThreadPool* pools[] = {nullptr, &pool2, &pool3};
  int case_index = 0;
  for (PackedFormat f : {PackedFormat::kNm2of4S8, PackedFormat::kNm4of8S8}) {
    const std::string suffix = std::string("_s8_") + CpuIsaName(ExpectedIsa(CpuOp::kSpmmNmS8, f));
    for (const Shape& s : shapes)
      for (SpmmLayout layout : {SpmmLayout::kRowMajor, SpmmLayout::kTransposed})
        for (ThreadPool* pool : pools)
          CheckSpmmS8(rng, cases[case_index++ % cases.size()], f, s, 1.0, layout, suffix, nullptr, pool);
  }
}

INSTANTIATE_TEST_SUITE_P(CpuKernels, IsaTest, ::testing::ValuesIn(kAllCpuIsas), testing::IsaParamName);

// ---------------------------------------------------------------------------
// The table: every row this CPU can run is run once, by name.

TEST(CpuKernelTable, EveryTableRowIsExercised) {
  std::mt19937 rng(505);
  std::set<std::string> ran, expected;
  const Shape s{19, 21, 45};
  for (const CpuKernelDef& def : CpuKernelTable()) {
    if (def.isa > DetectedIsa()) continue;
    expected.insert(def.name);
    ASSERT_TRUE(ForceIsa(def.isa).ok());
    SCOPED_TRACE(def.name);
    switch (def.op()) {
      case CpuOp::kGemmS8:
        CheckGemmS8(rng, S8Cases()[1], s, def.format, def.name, &ran);
        break;
      case CpuOp::kSpmmBsrF32:
        CheckSpmmBsrF32(rng, def.format, s, 0.5, SpmmLayout::kRowMajor, true, def.name, &ran);
        break;
      case CpuOp::kSpmmNmF32:
        CheckSpmmNmF32(rng, def.format, s, SpmmLayout::kTransposed, true, def.name, &ran);
        break;
      case CpuOp::kSpmmBsrS8:
      case CpuOp::kSpmmNmS8:
        CheckSpmmS8(rng, S8Cases()[2], def.format, s, 0.5, SpmmLayout::kRowMajor, def.name, &ran);
        break;
      case CpuOp::kGemmF32: {  // the full checks are in cpu_gemm_f32_test.cc
        std::vector<float> x(s.m * s.k), w(s.n * s.k), want(s.m * s.n), y(s.m * s.n);
        for (float& v : x) v = RandomNonzero(rng);
        for (float& v : w) v = RandomNonzero(rng);
        GemmF32Ref(false, true, s.m, s.n, s.k, 1.0f, x.data(), s.k, w.data(), s.k, 0.0f, want.data(), s.n, nullptr);
        StatusOr<PackedGemmF32> packed = PackGemmF32(w.data(), s.n, s.k, def.format, /*strips=*/true);
        ASSERT_TRUE(packed.ok());
        GemmF32Args args;
        args.w = &*packed, args.m = s.m, args.x = x.data(), args.ld_x = s.k, args.y = y.data(), args.ld_y = s.n;
        const char* name = nullptr;
        ASSERT_TRUE(RunGemmF32(args, &name).ok());
        ran.insert(name);
        for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], want[i], 1e-4f) << name;
        break;
      }
      case CpuOp::kGemvF32: {  // the full checks are in cpu_gemm_f32_test.cc
        std::vector<float> x(s.m * s.k), w(s.n * s.k), want(s.m * s.n), y(s.m * s.n);
        for (float& v : x) v = RandomNonzero(rng);
        for (float& v : w) v = RandomNonzero(rng);
        GemmF32Ref(false, true, s.m, s.n, s.k, 1.0f, x.data(), s.k, w.data(), s.k, 0.0f, want.data(), s.n, nullptr);
        StatusOr<PackedGemmF32> packed = PackGemmF32(w.data(), s.n, s.k, def.format, /*strips=*/true);
        ASSERT_TRUE(packed.ok());
        for (int64_t m : {int64_t{1}, s.m}) {  // one row, and several
          GemvF32Args args;
          args.w = &*packed, args.m = m, args.x = x.data(), args.ld_x = s.k, args.y = y.data(), args.ld_y = s.n;
          args.s0 = 0, args.s1 = packed->panels;
          def.get<GemvF32Fn>()(args);
          for (int64_t i = 0; i < m * s.n; ++i) ASSERT_NEAR(y[i], want[i], 1e-4f) << def.name;
        }
        ran.insert(def.name);
        break;
      }
      case CpuOp::kConvS8:  // the full checks are in cpu_conv_s8_test.cc
        if (testing::CheckConvS8Row(rng, def)) ran.insert(def.name);
        break;
      default:  // the rows without packed weights, called directly (cpu_row_kernels_test.cc)
        if (testing::CheckRowKernel(rng, def)) ran.insert(def.name);
        break;
    }
  }
  ResetIsa();
  for (const std::string& name : expected) EXPECT_EQ(ran.count(name), 1u) << name << " did not run";
  EXPECT_EQ(ran, expected);
}

TEST(CpuKernelTable, NamesAreUniqueAndSayTheirIsa) {
  std::set<std::string> names;
  for (const CpuKernelDef& def : CpuKernelTable()) {
    EXPECT_TRUE(names.insert(def.name).second) << "duplicate " << def.name;
    const std::string name = def.name, isa = std::string("_") + CpuIsaName(def.isa);
    EXPECT_EQ(name.substr(name.size() - isa.size()), isa) << name;
  }
}

// Selection never depends on row order: rows of one op and format have
// distinct priorities, a higher ISA never ranks below a lower one, and each op
// and format has a portable row.
TEST(CpuKernelTable, PrioritiesAreDistinctPerOpAndFormat) {
  const auto& table = CpuKernelTable();
  for (const CpuKernelDef& a : table) {
    bool portable = false;
    for (const CpuKernelDef& b : table) {
      if (a.op() != b.op() || a.format != b.format) continue;
      portable = portable || b.isa == CpuIsa::kPortable;
      if (&a == &b) continue;
      EXPECT_NE(a.priority, b.priority) << a.name << " and " << b.name;
      if (a.isa > b.isa) EXPECT_GT(a.priority, b.priority) << a.name << " ranks below " << b.name;
    }
    EXPECT_TRUE(portable) << a.name << ": no portable row for its op and format";
  }
}

TEST(CpuKernelTable, EveryFormatHasAPortableKernel) {
  ASSERT_TRUE(ForceIsa(CpuIsa::kPortable).ok());
  for (const PackedFormatTraits& t : kPackedFormatTraits) {
    const bool f32 = t.elem == ElemType::kF32;
    const CpuOp op = t.kind == LayoutKind::kPanel ? (f32 ? CpuOp::kGemmF32 : CpuOp::kGemmS8)
                     : t.kind == LayoutKind::kNm  ? (f32 ? CpuOp::kSpmmNmF32 : CpuOp::kSpmmNmS8)
                     : t.elem == ElemType::kF32   ? CpuOp::kSpmmBsrF32
                                                  : CpuOp::kSpmmBsrS8;
    const CpuKernelDef* def = SelectCpuKernel(op, t.format);
    ASSERT_NE(def, nullptr) << t.name;
    EXPECT_EQ(def->isa, CpuIsa::kPortable) << t.name;
  }
  ResetIsa();
}

TEST(CpuIsaControl, ParsesNamesAndRejectsUnknownOnes) {
  for (CpuIsa isa : kAllCpuIsas) {
    StatusOr<CpuIsa> parsed = ParseCpuIsa(CpuIsaName(isa));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, isa);
  }
  StatusOr<CpuIsa> bad = ParseCpuIsa("sse9");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("avx512vnni"), std::string::npos) << bad.status().message();
}

TEST(CpuIsaControl, ForceAndReset) {
  const CpuIsa before = ActiveIsa();
  ASSERT_TRUE(ForceIsa(CpuIsa::kPortable).ok());
  EXPECT_EQ(ActiveIsa(), CpuIsa::kPortable);
  ResetIsa();
  EXPECT_EQ(ActiveIsa(), before);
  if (DetectedIsa() < CpuIsa::kAvx512Vnni) {
    Status st = ForceIsa(CpuIsa::kAvx512Vnni);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("supports up to"), std::string::npos) << st.message();
  }
}

// ---------------------------------------------------------------------------
// Formats

TEST(PackedFormats, TraitsTableNamesRoundTrip) {
  std::set<std::string> names;
  for (const PackedFormatTraits& t : kPackedFormatTraits) {
    EXPECT_TRUE(names.insert(t.name).second) << t.name;
    StatusOr<PackedFormat> f = PackedFormatByName(t.name);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(*f, t.format);
    EXPECT_GT(ElemTypeBytes(t.elem), 0);
  }
  EXPECT_EQ(PackedFormatByName("bsr3x3_f32").status().code(), StatusCode::kNotFound);
  StatusOr<PackedFormat> bsr = BsrFormat(8, 8, ElemType::kS8);
  ASSERT_TRUE(bsr.ok());
  EXPECT_EQ(*bsr, PackedFormat::kBsr8x8S8);
  EXPECT_EQ(BsrFormat(2, 2, ElemType::kF32).status().code(), StatusCode::kNotSupported);
}

TEST(PackedFormats, BsrRoundTripAndStatistics) {
  std::mt19937 rng(606);
  for (PackedFormat f : kBsrF32Formats) {
    const PackedFormatTraits& t = Traits(f);
    for (const Shape& s : kSpmmShapes) {
      for (double d : kDensities) {
        std::vector<float> w = RandomBlockSparse<float>(rng, s.n, s.k, t.block_rows, t.block_cols, d);
        StatusOr<BsrF32> p = PackBsr(w.data(), s.n, s.k, f);
        ASSERT_TRUE(p.ok());
        EXPECT_EQ(UnpackBsr(*p), w);
        int64_t nonzeros = 0;
        for (float v : w) nonzeros += v != 0.0f;
        EXPECT_EQ(p->stats.nonzeros, nonzeros);
        EXPECT_EQ(p->stats.elements, s.n * s.k);
        EXPECT_EQ(p->stats.blocks, p->block_row_count() * p->block_col_count());
        EXPECT_EQ(p->stats.stored_values, p->stored_blocks() * t.block_rows * t.block_cols);
        EXPECT_LE(p->stats.fill(), 1.0);
        if (d == 0.0) EXPECT_EQ(p->stored_blocks(), 0);
        for (size_t r = 0; r + 1 < p->row_ptr.size(); ++r) {
          for (int64_t b = p->row_ptr[r] + 1; b < p->row_ptr[r + 1]; ++b)
            EXPECT_LT(p->col_index[b - 1], p->col_index[b]) << "block columns increase within a row";
        }
      }
    }
  }
}

TEST(PackedFormats, BsrKeepsNegativeZeroOutAndNanIn) {
  const float w[8] = {-0.0f, 0.0f, 0.0f, 0.0f, 0.0f, NAN, 0.0f, 0.0f};
  StatusOr<BsrF32> p = PackBsr(w, 2, 4, PackedFormat::kBsr1x4F32);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->stored_blocks(), 1);  // -0 is a zero; NaN is data
  EXPECT_EQ(p->stats.nonzeros, 1);
  EXPECT_EQ(p->col_index[0], 0);
  EXPECT_EQ(p->row_ptr, (std::vector<int64_t>{0, 0, 1}));
}

TEST(PackedFormats, BsrInt8RowSums) {
  const int8_t w[2 * 5] = {1, -2, 3, 0, 0, 0, 0, 0, 0, 127};
  StatusOr<BsrS8> p = PackBsr(w, 2, 5, PackedFormat::kBsr4x4S8);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->row_sums, (std::vector<int32_t>{2, 127}));
  EXPECT_EQ(p->stored_blocks(), 2);
}

TEST(PackedFormats, NmRoundTripAndFillers) {
  // The example of packed_formats.h: 2:4, K = 10.
  const float w[10] = {0, 1, 0, 2, 3, 0, 0, 0, 0, 4};
  StatusOr<NmF32> p = PackNm(w, 1, 10, PackedFormat::kNm2of4F32);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->values, (std::vector<float>{1, 2, 3, 0, 0, 4}));
  EXPECT_EQ(p->indices, (std::vector<uint8_t>{1, 3, 0, 1, 0, 1}));
  EXPECT_EQ(UnpackNm(*p), std::vector<float>(w, w + 10));
  // A last group narrower than N repeats position 0 with a zero value.
  const float narrow[5] = {1, 0, 0, 0, 5};
  StatusOr<NmF32> q = PackNm(narrow, 1, 5, PackedFormat::kNm2of4F32);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->indices, (std::vector<uint8_t>{0, 1, 0, 0}));
  EXPECT_EQ(q->values, (std::vector<float>{1, 0, 0, 5}));
  EXPECT_EQ(UnpackNm(*q), std::vector<float>(narrow, narrow + 5));
}

TEST(PackedFormats, NmRejectsWeightsThatAreNotNm) {
  const float w[2 * 8] = {1, 0, 2, 0, 0, 0, 0, 1,   //
                          1, 1, 0, 1, 0, 0, 0, 0};  // row 1, columns 0..3: 3 nonzeros
  StatusOr<NmF32> p = PackNm(w, 2, 8, PackedFormat::kNm2of4F32);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("row 1, columns 0..3 hold 3 nonzeros"), std::string::npos)
      << p.status().message();
  // The same weights are 4:8.
  EXPECT_TRUE(PackNm(w, 2, 8, PackedFormat::kNm4of8F32).ok());
  const int8_t ws[4] = {1, 1, 1, 0};
  EXPECT_FALSE(PackNm(ws, 1, 4, PackedFormat::kNm2of4S8).ok());
}

TEST(PackedFormats, PackersRejectBadArguments) {
  const float wf[4] = {1, 2, 3, 4};
  const int8_t ws[4] = {1, 2, 3, 4};
  EXPECT_EQ(PackBsr(wf, 1, 4, PackedFormat::kBsr4x4S8).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PackBsr(ws, 1, 4, PackedFormat::kNm2of4S8).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PackBsr(wf, -1, 4, PackedFormat::kBsr4x4F32).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PackBsr<float>(nullptr, 1, 4, PackedFormat::kBsr4x4F32).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PackNm(wf, 1, 4, PackedFormat::kBsr1x4F32).status().code(), StatusCode::kInvalidArgument);
  int32_t zp = 200;  // outside int8
  StatusOr<PackedGemmS8> g = PackGemmS8(ws, 1, 4, GemmZeroPoints{&zp, false}, PackedFormat::kPanel16x4S8);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("zero point 200"), std::string::npos) << g.status().message();
  EXPECT_FALSE(PackGemmS8(ws, 1, 4, GemmZeroPoints{}, PackedFormat::kBsr4x4S8).ok());
}

TEST(CpuKernelArgs, EntryPointsRejectBadArguments) {
  const int8_t w[4] = {1, 2, 3, 4};
  StatusOr<PackedGemmS8> b = PackGemmS8(w, 1, 4, GemmZeroPoints{}, PackedFormat::kPanel16x4S8);
  ASSERT_TRUE(b.ok());
  uint8_t a[4] = {1, 2, 3, 4};
  int32_t c[1];
  GemmS8Args args;
  args.m = 1;
  args.a = a;
  args.lda = 4;
  args.b = &*b;
  EXPECT_NE(RunGemmS8(args).message().find("no output"), std::string::npos);
  args.out.out_s32 = c;
  args.out.ld_s32 = 1;
  EXPECT_TRUE(RunGemmS8(args).ok());
  args.lda = 3;
  EXPECT_NE(RunGemmS8(args).message().find("row stride 3 < 4"), std::string::npos) << RunGemmS8(args).message();
  args.lda = 4;
  int32_t bad_zp = -1;  // uint8 activations
  args.a_zp = GemmZeroPoints{&bad_zp, false};
  EXPECT_EQ(RunGemmS8(args).code(), StatusCode::kInvalidArgument);
  args.a_zp = GemmZeroPoints{};
  int8_t q[1];
  args.out.out_q = q;
  args.out.ld_q = 1;
  EXPECT_NE(RunGemmS8(args).message().find("multiplier"), std::string::npos);
  args.b = nullptr;
  EXPECT_EQ(RunGemmS8(args).code(), StatusCode::kInvalidArgument);

  const float wf[4] = {1, 0, 0, 0};
  StatusOr<BsrF32> bsr = PackBsr(wf, 1, 4, PackedFormat::kBsr1x4F32);
  ASSERT_TRUE(bsr.ok());
  float x[4] = {1, 2, 3, 4}, y[1];
  SpmmBsrF32Args sp;
  sp.m = 1;
  sp.x = x;
  sp.ld_x = 2;
  sp.w = &*bsr;
  sp.y = y;
  sp.ld_y = 1;
  EXPECT_NE(RunSpmmBsrF32(sp).message().find("ld_x 2 < 4 (K)"), std::string::npos) << RunSpmmBsrF32(sp).message();
  sp.ld_x = 4;
  ASSERT_TRUE(RunSpmmBsrF32(sp).ok());
  EXPECT_EQ(y[0], 1.0f);

  const int8_t w24[4] = {0, 3, 0, -2};
  StatusOr<NmS8> nm = PackNm(w24, 1, 4, PackedFormat::kNm2of4S8);
  ASSERT_TRUE(nm.ok());
  SpmmNmS8Args ns;
  ns.m = 1;
  ns.x = a;
  ns.ld_x = 4;
  ns.w = &*nm;
  EXPECT_NE(RunSpmmNmS8(ns).message().find("null output"), std::string::npos) << RunSpmmNmS8(ns).message();
  ns.out.out_s32 = c;
  ns.out.ld_s32 = 1;
  ns.x_zero_point = 256;  // outside uint8
  EXPECT_NE(RunSpmmNmS8(ns).message().find("zero point 256"), std::string::npos) << RunSpmmNmS8(ns).message();
  ns.x_zero_point = 1;
  ns.ld_x = 3;
  EXPECT_NE(RunSpmmNmS8(ns).message().find("ld_x 3 < 4 (K)"), std::string::npos) << RunSpmmNmS8(ns).message();
  ns.ld_x = 4;
  ASSERT_TRUE(RunSpmmNmS8(ns).ok());
  EXPECT_EQ(c[0], 3 * (2 - 1) - 2 * (4 - 1));
  ns.w = nullptr;
  EXPECT_EQ(RunSpmmNmS8(ns).code(), StatusCode::kInvalidArgument);
  NmS8 not_nm;
  not_nm.format = PackedFormat::kNm2of4F32;
  EXPECT_EQ(PrepackSpmmNmS8(not_nm).status().code(), StatusCode::kInvalidArgument);
  // Panels of another matrix are not used: the kernel builds its own.
  const int8_t other_w[4] = {5, 0, 0, 0};
  StatusOr<NmS8> other = PackNm(other_w, 1, 4, PackedFormat::kNm2of4S8);
  ASSERT_TRUE(other.ok());
  StatusOr<NmS8Panels> other_panels = PrepackSpmmNmS8(*other);
  ASSERT_TRUE(other_panels.ok());
  ns.w = &*nm;
  ns.panels = &*other_panels;
  ASSERT_TRUE(RunSpmmNmS8(ns).ok());
  EXPECT_EQ(c[0], 3 * (2 - 1) - 2 * (4 - 1));
}

}  // namespace
}  // namespace sparq
