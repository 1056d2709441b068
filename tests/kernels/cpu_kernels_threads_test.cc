// The fast CPU kernels on a thread pool: results must be bit for bit those of
// the single-threaded run (each output element is summed by one task in a
// fixed order), and the INT8 ones equal to the reference. Shapes make the
// drivers split both ways: many M tiles, and few M tiles with the block rows
// (or column blocks) split across tasks.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/packed_formats.h"
#include "kernels/parallel.h"
#include "kernels/ref/gemm_int.h"

namespace sparq {
namespace {

struct Shape {
  int64_t m, n, k;
};
// Few M tiles (the sparse drivers split block rows), many M tiles, and more
// than one 512-column block of the INT8 GEMM.
const std::vector<Shape> kShapes = {{3, 130, 70}, {5, 257, 33}, {200, 40, 45}, {150, 600, 100}};
constexpr int kThreads = 4;

std::vector<float> RandomF32(std::mt19937& rng, size_t count, double zero_fraction) {
  std::uniform_real_distribution<float> v(-1.0f, 1.0f);
  std::bernoulli_distribution zero(zero_fraction);
  std::vector<float> out(count);
  for (float& x : out) x = zero(rng) ? 0.0f : v(rng);
  return out;
}

// Zeroes all but `keep` values of every group of `group` columns.
void MakeNm(std::vector<float>* w, int64_t cols, int group, int keep) {
  for (size_t i = 0; i < w->size(); ++i) {
    if (static_cast<int64_t>(i % cols) % group >= keep) (*w)[i] = 0.0f;
  }
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(CpuKernelThreads, SpmmF32IsDeterministic) {
  std::mt19937 rng(707);
  ThreadPool pool(kThreads);
  for (const Shape& s : kShapes) {
    SCOPED_TRACE("M=" + std::to_string(s.m) + " N=" + std::to_string(s.n) + " K=" + std::to_string(s.k));
    const std::vector<float> x = RandomF32(rng, s.m * s.k, 0.0);
    const std::vector<float> bias = RandomF32(rng, s.n, 0.0);
    for (SpmmLayout layout : {SpmmLayout::kRowMajor, SpmmLayout::kTransposed}) {
      const int64_t ld_x = layout == SpmmLayout::kRowMajor ? s.k : s.m;
      const int64_t ld_y = layout == SpmmLayout::kRowMajor ? s.n : s.m;
      // BSR 4x4, ~60% zeros.
      std::vector<float> w = RandomF32(rng, s.n * s.k, 0.6);
      StatusOr<BsrF32> bsr = PackBsr(w.data(), s.n, s.k, PackedFormat::kBsr4x4F32);
      ASSERT_TRUE(bsr.ok());
      std::vector<float> y1(s.m * s.n), y4(s.m * s.n);
      SpmmBsrF32Args a;
      a.layout = layout;
      a.m = s.m;
      a.x = x.data();  // read as X or X^T: only determinism is checked here
      a.ld_x = ld_x;
      a.w = &*bsr;
      a.bias = bias.data();
      a.ld_y = ld_y;
      a.y = y1.data();
      ASSERT_TRUE(RunSpmmBsrF32(a).ok());
      a.y = y4.data();
      a.pool = &pool;
      ASSERT_TRUE(RunSpmmBsrF32(a).ok());
      EXPECT_TRUE(SameBits(y1, y4)) << "BSR f32";
      // 2:4.
      MakeNm(&w, s.k, 4, 2);
      StatusOr<NmF32> nm = PackNm(w.data(), s.n, s.k, PackedFormat::kNm2of4F32);
      ASSERT_TRUE(nm.ok()) << nm.status().ToString();
      SpmmNmF32Args b;
      b.layout = layout;
      b.m = s.m;
      b.x = x.data();
      b.ld_x = ld_x;
      b.w = &*nm;
      b.bias = bias.data();
      b.ld_y = ld_y;
      b.y = y1.data();
      ASSERT_TRUE(RunSpmmNmF32(b).ok());
      b.y = y4.data();
      b.pool = &pool;
      ASSERT_TRUE(RunSpmmNmF32(b).ok());
      EXPECT_TRUE(SameBits(y1, y4)) << "2:4 f32";
    }
  }
}

TEST(CpuKernelThreads, Int8KernelsMatchReferenceOnAPool) {
  std::mt19937 rng(808);
  ThreadPool pool(kThreads);
  std::uniform_int_distribution<int32_t> u8(0, 255), s8(-128, 127);
  std::bernoulli_distribution zero(0.7);
  for (const Shape& s : kShapes) {
    SCOPED_TRACE("M=" + std::to_string(s.m) + " N=" + std::to_string(s.n) + " K=" + std::to_string(s.k));
    std::vector<uint8_t> a(s.m * s.k);
    for (uint8_t& v : a) v = static_cast<uint8_t>(u8(rng));
    std::vector<int8_t> w(s.n * s.k), wt(s.n * s.k);
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t k = 0; k < s.k; ++k) wt[k * s.n + n] = w[n * s.k + k] = static_cast<int8_t>(zero(rng) ? 0 : s8(rng));
    const int32_t a_zp = 131;
    std::vector<int32_t> ref(s.m * s.n);
    GemmS32Ref<uint8_t, int8_t>(s.m, s.n, s.k, a.data(), s.k, GemmZeroPoints{&a_zp, false}, wt.data(), s.n,
                                GemmZeroPoints{}, ref.data(), s.n);
    // Dense INT8 GEMM in both panel formats (the portable kernel reads either).
    for (PackedFormat f : {PackedFormat::kPanel16x4S8, PackedFormat::kPanel16x2S16}) {
      StatusOr<PackedGemmS8> packed = PackGemmS8(w.data(), s.n, s.k, GemmZeroPoints{}, f);
      ASSERT_TRUE(packed.ok());
      GemmS8Args g;
      g.m = s.m;
      g.a = a.data();
      g.lda = s.k;
      g.a_zp = GemmZeroPoints{&a_zp, false};
      g.b = &*packed;
      g.pool = &pool;
      std::vector<int32_t> got(ref.size(), -1);
      g.out.out_s32 = got.data();
      g.out.ld_s32 = s.n;
      ASSERT_TRUE(RunGemmS8(g).ok());
      EXPECT_EQ(got, ref) << Traits(f).name;
    }
    // BSR 4x4 INT8, row-major output.
    StatusOr<BsrS8> bsr = PackBsr(w.data(), s.n, s.k, PackedFormat::kBsr4x4S8);
    ASSERT_TRUE(bsr.ok());
    SpmmBsrS8Args b;
    b.m = s.m;
    b.x = a.data();
    b.ld_x = s.k;
    b.x_zero_point = a_zp;
    b.w = &*bsr;
    b.pool = &pool;
    std::vector<int32_t> got(ref.size(), -1);
    b.out.out_s32 = got.data();
    b.out.ld_s32 = s.n;
    ASSERT_TRUE(RunSpmmBsrS8(b).ok());
    EXPECT_EQ(got, ref) << "bsr4x4_s8";
  }
}

}  // namespace
}  // namespace sparq
