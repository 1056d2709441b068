// Throughput of sparq's CPU GEMM kernels on layer shapes of ResNet-50 and
// BERT-base, one thread:
//
//   f32_ref      GemmF32Ref, the dense FP32 reference GEMM (kernels/ref/gemm.h)
//   f32_dense    gemm_f32, sparq's dense FP32 GEMM (weights packed once; conv
//                layers through its convolution source, as a 1x1 conv)
//   s8_dense     gemm_s8 (INT8 dense, u8 activations x s8 weights, requantized to u8)
//   s8_conv      conv_s8 (convolution shapes: the NCHW INT8 convolution as a 1x1
//                convolution of K channels over M positions, requantized in the tile)
//   f32_bsr4x4   spmm_bsr4x4_f32 at 80% block sparsity
//   s8_bsr4x4    spmm_bsr4x4_s8 at 80% block sparsity (requantized to u8)
//   s8_bsr4x4_50 spmm_bsr4x4_s8 at 50% block sparsity
//   f32_nm24     spmm_nm24_f32 (2:4, 50% sparsity)
//   s8_nm24      spmm_nm24_s8 (2:4, 50% sparsity, requantized to u8)
//   s8_nm48      spmm_nm48_s8 (4:8, 50% sparsity, requantized to u8)
//
// With oneDNN (libdnnl-dev; the bench's CMake finds it), two baselines more,
// run on one thread as well:
//
//   f32_onednn   dnnl_sgemm, a tuned dense FP32 GEMM
//   s8_onednn    dnnl_gemm_u8s8s32 (int32 output; it packs B on every call,
//                while gemm_s8 reuses weights packed once)
//
// Each kernel runs at the best ISA of this CPU (SPARQ_ISA=avx2|avx512|... lowers
// it; the ISA and kernel names are printed in the benchmark label). Counter
// `GOPS` is DENSE-EQUIVALENT: 2 * M * N * K operations per call, whatever the
// kernel skips, so a sparse kernel's GOPS over f32_ref's is its speed-up.
// Weights are packed once, outside the timed loop.
//
// GEMM convention (kernels/cpu/kernel_args.h): Y[M, N] = X[M, K] * W^T, W [N, K].
// ResNet-50 convolutions (batch 1, 224 x 224) as im2col GEMMs: N = output
// channels, K = in_channels * kh * kw, M = output pixels; their sparse kernels
// run in the NCHW-native transposed layout (Y^T = W * X^T). BERT-base (128
// tokens): M = tokens, row-major.
//
//   bench/kernels_bench --benchmark_min_time=0.2 [--benchmark_filter=resnet]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#if SPARQ_BENCH_HAVE_DNNL
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#endif

#include "kernels/cpu/dispatch.h"
#include "kernels/packed_formats.h"
#include "kernels/ref/gemm.h"
#include "kernels/ref/quantize.h"

namespace sparq {
namespace {

struct LayerShape {
  const char* name;
  int64_t m, n, k;
  bool conv;  // true: sparse kernels in the transposed (NCHW) layout
};

// clang-format off
const LayerShape kShapes[] = {
  // ResNet-50: 3x3 convolutions of each stage, and 1x1 projections.
  {"resnet50/conv2_3x3",  3136,   64,  576, true},
  {"resnet50/conv3_3x3",   784,  128, 1152, true},
  {"resnet50/conv4_3x3",   196,  256, 2304, true},
  {"resnet50/conv5_3x3",    49,  512, 4608, true},
  {"resnet50/conv4_1x1_expand", 196, 1024, 256, true},
  {"resnet50/conv5_1x1_expand",  49, 2048, 512, true},
  // EfficientNet-Lite0: 1x1 expansions at 56 x 56 and 7 x 7.
  {"efficientnet/1x1_24x144",  3136,  144,   24, true},
  {"efficientnet/1x1_192x1152",  49, 1152,  192, true},
  // BERT-base, 128 tokens.
  {"bert/attn_768x768",    128,  768,  768, false},
  {"bert/ffn_up_3072x768", 128, 3072,  768, false},
  {"bert/ffn_down_768x3072", 128, 768, 3072, false},
  // EfficientNet-Lite0 (batch 1, 224 x 224): its 1x1 convolutions, one per
  // plane size and direction (expand: K < N; project: K > N). 14 x 14 and
  // 7 x 7 hold 73% of the model's 339 M pointwise multiply-adds.
  {"effnet_lite0/b1_expand_112",   12544,   96,   16, true},
  {"effnet_lite0/b2_expand_56",     3136,  144,   24, true},
  {"effnet_lite0/b2_project_56",    3136,   24,  144, true},
  {"effnet_lite0/b4_expand_28",      784,  240,   40, true},
  {"effnet_lite0/b4_project_28",     784,   40,  240, true},
  {"effnet_lite0/b7_expand_14",      196,  480,   80, true},
  {"effnet_lite0/b7_project_14",     196,   80,  480, true},
  {"effnet_lite0/b10_expand_14",     196,  672,  112, true},
  {"effnet_lite0/b10_project_14",    196,  112,  672, true},
  {"effnet_lite0/b13_expand_7",       49, 1152,  192, true},
  {"effnet_lite0/b13_project_7",      49,  192, 1152, true},
  {"effnet_lite0/head_7",             49, 1280,  320, true},
  // YOLOv8n (320 x 320): few output channels, K from 32 to 1152 (3x3
  // windows as their im2col depth).
  {"yolov8n/model1_3x3s2_80",       6400,   32,  144, true},
  {"yolov8n/c2f_1x1_80",            6400,   32,   32, true},
  {"yolov8n/model3_3x3s2_40",       1600,   64,  288, true},
  {"yolov8n/head_3x3_40",           1600,   64,  576, true},
  {"yolov8n/model7_3x3s2_10",        100,  256, 1152, true},
};
// clang-format on

constexpr double kBlockSparsity = 0.8;

// Inputs of one shape, drawn once.
struct Problem {
  std::vector<float> x;       // [M, K]
  std::vector<float> xt;      // [K, M]
  std::vector<float> w;       // [N, K] dense
  std::vector<float> w_bsr;   // [N, K] with 80% of the 4x4 blocks zero
  std::vector<float> w_nm;    // [N, K] 2:4
  std::vector<uint8_t> x_u8;  // [M, K]
  std::vector<int8_t> w_s8;   // [N, K] dense
  std::vector<int8_t> w_s8_bsr;
  std::vector<int8_t> w_s8_bsr50;  // [N, K] with 50% of the 4x4 blocks zero
  std::vector<int8_t> w_s8_nm24;  // [N, K] 2:4 (kept positions vary per group)
  std::vector<int8_t> w_s8_nm48;  // [N, K] 4:8
};

Problem MakeProblem(const LayerShape& s) {
  std::mt19937 rng(static_cast<uint32_t>(s.m * 131 + s.n * 7 + s.k));
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  std::uniform_int_distribution<int> u8(0, 255), s8(-127, 127);
  std::bernoulli_distribution drop_block(kBlockSparsity);
  Problem p;
  p.x.resize(s.m * s.k);
  p.xt.resize(s.m * s.k);
  p.x_u8.resize(s.m * s.k);
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.k; ++j) {
      const float v = val(rng);
      p.x[i * s.k + j] = p.xt[j * s.m + i] = v;
      p.x_u8[i * s.k + j] = static_cast<uint8_t>(u8(rng));
    }
  p.w.resize(s.n * s.k);
  p.w_s8.resize(s.n * s.k);
  for (size_t i = 0; i < p.w.size(); ++i) {
    p.w[i] = val(rng);
    int q = s8(rng);
    p.w_s8[i] = static_cast<int8_t>(q == 0 ? 1 : q);
  }
  p.w_bsr = p.w;
  p.w_s8_bsr = p.w_s8;
  for (int64_t r = 0; r < s.n; r += 4)
    for (int64_t c = 0; c < s.k; c += 4) {
      if (!drop_block(rng)) continue;
      for (int64_t i = r; i < std::min(s.n, r + 4); ++i)
        for (int64_t j = c; j < std::min(s.k, c + 4); ++j) p.w_bsr[i * s.k + j] = 0.0f, p.w_s8_bsr[i * s.k + j] = 0;
    }
  p.w_s8_bsr50 = p.w_s8;
  std::bernoulli_distribution drop_half(0.5);
  for (int64_t r = 0; r < s.n; r += 4)
    for (int64_t c = 0; c < s.k; c += 4) {
      if (!drop_half(rng)) continue;
      for (int64_t i = r; i < std::min(s.n, r + 4); ++i)
        for (int64_t j = c; j < std::min(s.k, c + 4); ++j) p.w_s8_bsr50[i * s.k + j] = 0;
    }
  p.w_nm = p.w;
  for (int64_t i = 0; i < s.n; ++i)
    for (int64_t j = 0; j < s.k; ++j)
      if ((j % 4) >= 2) p.w_nm[i * s.k + j] = 0.0f;  // keep the first 2 of every 4
  // INT8 N:M with random kept positions: the kernel's shuffles depend on them.
  p.w_s8_nm24 = p.w_s8;
  p.w_s8_nm48 = p.w_s8;
  for (auto [w, group] : {std::pair<std::vector<int8_t>*, int>{&p.w_s8_nm24, 4}, {&p.w_s8_nm48, 8}}) {
    std::vector<int> order(group);
    for (int64_t i = 0; i < s.n; ++i)
      for (int64_t j0 = 0; j0 < s.k; j0 += group) {
        for (int t = 0; t < group; ++t) order[t] = t;
        std::shuffle(order.begin(), order.end(), rng);
        for (int t = group / 2; t < group; ++t)
          if (j0 + order[t] < s.k) (*w)[i * s.k + j0 + order[t]] = 0;
      }
  }
  return p;
}

const Problem& ProblemFor(const LayerShape& s) {
  static std::vector<std::pair<const LayerShape*, Problem>>* cache =
      new std::vector<std::pair<const LayerShape*, Problem>>;
  for (auto& entry : *cache)
    if (entry.first == &s) return entry.second;
  cache->emplace_back(&s, MakeProblem(s));
  return cache->back().second;
}

void SetCounters(benchmark::State& state, const LayerShape& s, const std::string& label) {
  state.counters["GOPS"] =
      benchmark::Counter(2.0 * s.m * s.n * s.k * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(label);
}

void BenchF32Ref(benchmark::State& state, const LayerShape* s) {
  const Problem& p = ProblemFor(*s);
  std::vector<float> y(s->m * s->n);
  for (auto _ : state) {
    if (s->conv) {  // Y^T [N, M] = W [N, K] * X^T [K, M], as the reference Conv does
      GemmF32Ref(false, false, s->n, s->m, s->k, 1.0f, p.w.data(), s->k, p.xt.data(), s->m, 0.0f, y.data(), s->m,
                 nullptr);
    } else {
      GemmF32Ref(false, true, s->m, s->n, s->k, 1.0f, p.x.data(), s->k, p.w.data(), s->k, 0.0f, y.data(), s->n,
                 nullptr);
    }
    benchmark::DoNotOptimize(y.data());
  }
  SetCounters(state, *s, "gemm_f32_ref");
}

// gemm_f32: conv layers as a 1x1 convolution over X^T [K, M] (the NCHW
// layout, Y^T [N, M]: what the executor's Conv runs, im2col packing
// included), BERT layers row-major.
void BenchF32Dense(benchmark::State& state, const LayerShape* s) {
  const Problem& p = ProblemFor(*s);
  StatusOr<PackedGemmF32> w = PackGemmF32(p.w.data(), s->n, s->k, PreferredGemmF32Format(ActiveIsa()), !s->conv);
  if (!w.ok()) return state.SkipWithError(w.status().ToString().c_str());
  std::vector<float> y(s->m * s->n);
  GemmF32Args args;
  args.w = &*w;
  if (s->conv) {
    args.source = GemmF32Source::kConv;
    args.batch = 1;
    args.conv.channels = s->k, args.conv.height = 1, args.conv.width = s->m;
    args.conv.out_h = 1, args.conv.out_w = s->m;
    args.x = p.xt.data(), args.y = y.data();
    args.x_image_stride = s->k * s->m, args.y_image_stride = s->n * s->m;
  } else {
    args.m = s->m, args.x = p.x.data(), args.ld_x = s->k, args.y = y.data(), args.ld_y = s->n;
  }
  const char* name = "gemm_f32";
  for (auto _ : state) {
    Status st = RunGemmF32(args, &name);
    if (!st.ok()) return state.SkipWithError(st.ToString().c_str());
    benchmark::DoNotOptimize(y.data());
  }
  SetCounters(state, *s, name);
}

// gemm_f32's pointwise source on conv layers: pixels as the tile's rows,
// weights packed as strips, the output stored transposed into NCHW (what the
// executor runs for 1x1 convolutions on small planes).
void BenchF32Pointwise(benchmark::State& state, const LayerShape* s) {
  const Problem& p = ProblemFor(*s);
  StatusOr<PackedGemmF32> w = PackGemmF32(p.w.data(), s->n, s->k, PreferredGemmF32Format(ActiveIsa()), true);
  if (!w.ok()) return state.SkipWithError(w.status().ToString().c_str());
  std::vector<float> y(s->m * s->n);
  GemmF32Args args;
  args.w = &*w;
  args.source = GemmF32Source::kPointwiseConv;
  args.batch = 1;
  args.conv.channels = s->k, args.conv.height = 1, args.conv.width = s->m;
  args.conv.out_h = 1, args.conv.out_w = s->m;
  args.x = p.xt.data(), args.y = y.data();
  args.x_image_stride = s->k * s->m, args.y_image_stride = s->n * s->m;
  const char* name = "gemm_f32";
  for (auto _ : state) {
    Status st = RunGemmF32(args, &name);
    if (!st.ok()) return state.SkipWithError(st.ToString().c_str());
    benchmark::DoNotOptimize(y.data());
  }
  SetCounters(state, *s, std::string(name) + " pointwise");
}

#if SPARQ_BENCH_HAVE_DNNL
void BenchF32OneDnn(benchmark::State& state, const LayerShape* s) {
  const Problem& p = ProblemFor(*s);
  std::vector<float> y(s->m * s->n);
  for (auto _ : state) {
    // Row-major, like the reference above.
    const dnnl_status_t st =
        s->conv
            ? dnnl_sgemm('N', 'N', s->n, s->m, s->k, 1.0f, p.w.data(), s->k, p.xt.data(), s->m, 0.0f, y.data(), s->m)
            : dnnl_sgemm('N', 'T', s->m, s->n, s->k, 1.0f, p.x.data(), s->k, p.w.data(), s->k, 0.0f, y.data(), s->n);
    if (st != dnnl_success) return state.SkipWithError("dnnl_sgemm failed");
    benchmark::DoNotOptimize(y.data());
  }
  SetCounters(state, *s, "dnnl_sgemm");
}

void BenchS8OneDnn(benchmark::State& state, const LayerShape* s) {
  const Problem& p = ProblemFor(*s);
  std::vector<int32_t> c(s->m * s->n);
  const int32_t c_offset = 0;
  for (auto _ : state) {
    // C[M, N] = (X_u8 - 128) * W_s8^T, as gemm_s8 computes before requantizing.
    const dnnl_status_t st = dnnl_gemm_u8s8s32('N', 'T', 'F', s->m, s->n, s->k, 1.0f, p.x_u8.data(), s->k, 128,
                                               p.w_s8.data(), s->k, 0, 0.0f, c.data(), s->n, &c_offset);
    if (st != dnnl_success) return state.SkipWithError("dnnl_gemm_u8s8s32 failed");
    benchmark::DoNotOptimize(c.data());
  }
  SetCounters(state, *s, "dnnl_gemm_u8s8s32");
}
#endif  // SPARQ_BENCH_HAVE_DNNL

// Requantization to u8, one multiplier per channel.
struct U8Output {
  std::vector<uint8_t> q;
  std::vector<float> multiplier;
  S8Epilogue Epilogue(int64_t ld) {
    S8Epilogue e;
    e.out_q = q.data();
    e.out_q_signed = false;
    e.ld_q = ld;
    e.multiplier = multiplier.data();
    e.zero_point = 128;
    return e;
  }
};

U8Output MakeU8Output(const LayerShape& s) {
  U8Output o;
  o.q.resize(s.m * s.n);
  o.multiplier.assign(s.n, 1.0f / (64.0f * static_cast<float>(s.k)));
  return o;
}

void BenchS8Dense(benchmark::State& state, const LayerShape* s) {
  const Problem& p = ProblemFor(*s);
  const PackedFormat format = PreferredGemmS8Format(ActiveIsa());
  StatusOr<PackedGemmS8> packed = PackGemmS8(p.w_s8.data(), s->n, s->k, GemmZeroPoints{}, format);
  if (!packed.ok()) return state.SkipWithError(packed.status().ToString().c_str());
  U8Output out = MakeU8Output(*s);
  const int32_t a_zp = 128;
  GemmS8Args args;
  args.m = s->m;
  args.a = p.x_u8.data();
  args.lda = s->k;
  args.a_zp = GemmZeroPoints{&a_zp, false};
  args.b = &*packed;
  args.out = out.Epilogue(s->n);
  const char* name = "";
  for (auto _ : state) {
    Status st = RunGemmS8(args, &name);
    if (!st.ok()) return state.SkipWithError(st.ToString().c_str());
    benchmark::DoNotOptimize(out.q.data());
  }
  SetCounters(state, *s, name);
}

// conv_s8 on X^T [K, M] as the NCHW image of a 1x1 convolution (K channels,
// M = height positions, width 1): its packing of the activations is timed.
void BenchS8Conv(benchmark::State& state, const LayerShape* s) {
  const Problem& p = ProblemFor(*s);
  const PackedFormat format = PreferredGemmS8Format(ActiveIsa());
  StatusOr<PackedGemmS8> packed = PackGemmS8(p.w_s8.data(), s->n, s->k, GemmZeroPoints{}, format);
  if (!packed.ok()) return state.SkipWithError(packed.status().ToString().c_str());
  std::vector<uint8_t> xt(s->m * s->k);
  for (int64_t i = 0; i < s->m; ++i)
    for (int64_t j = 0; j < s->k; ++j) xt[j * s->m + i] = p.x_u8[i * s->k + j];
  U8Output out = MakeU8Output(*s);
  ConvS8Args args;
  args.w = &*packed;
  args.conv.channels = s->k, args.conv.height = s->m, args.conv.width = 1;
  args.conv.out_h = s->m, args.conv.out_w = 1;
  args.batch = 1;
  args.x = xt.data();
  args.x_zero_point = 128;
  args.multiplier = out.multiplier.data();
  args.y_zero_point = 128;
  args.y = out.q.data();
  const char* name = "";
  for (auto _ : state) {
    Status st = RunConvS8(args, &name);
    if (!st.ok()) return state.SkipWithError(st.ToString().c_str());
    benchmark::DoNotOptimize(out.q.data());
  }
  SetCounters(state, *s, name);
}

void BenchF32Bsr(benchmark::State& state, const LayerShape* s) {
  const Problem& p = ProblemFor(*s);
  StatusOr<BsrF32> packed = PackBsr(p.w_bsr.data(), s->n, s->k, PackedFormat::kBsr4x4F32);
  if (!packed.ok()) return state.SkipWithError(packed.status().ToString().c_str());
  std::vector<float> y(s->m * s->n);
  SpmmBsrF32Args args;
  args.layout = s->conv ? SpmmLayout::kTransposed : SpmmLayout::kRowMajor;
  args.m = s->m;
  args.x = s->conv ? p.xt.data() : p.x.data();
  args.ld_x = s->conv ? s->m : s->k;
  args.w = &*packed;
  args.y = y.data();
  args.ld_y = s->conv ? s->m : s->n;
  const char* name = "";
  for (auto _ : state) {
    Status st = RunSpmmBsrF32(args, &name);
    if (!st.ok()) return state.SkipWithError(st.ToString().c_str());
    benchmark::DoNotOptimize(y.data());
  }
  SetCounters(state, *s, std::string(name) + " block_density=" + std::to_string(packed->stats.block_density()));
}

template <bool kHalf>
void BenchS8Bsr(benchmark::State& state, const LayerShape* s) {
  const Problem& p = ProblemFor(*s);
  StatusOr<BsrS8> packed = PackBsr((kHalf ? p.w_s8_bsr50 : p.w_s8_bsr).data(), s->n, s->k, PackedFormat::kBsr4x4S8);
  if (!packed.ok()) return state.SkipWithError(packed.status().ToString().c_str());
  U8Output out = MakeU8Output(*s);
  SpmmBsrS8Args args;
  args.layout = s->conv ? SpmmLayout::kTransposed : SpmmLayout::kRowMajor;
  args.m = s->m;
  std::vector<uint8_t> xt;
  if (s->conv) {
    xt.resize(p.x_u8.size());
    for (int64_t i = 0; i < s->m; ++i)
      for (int64_t j = 0; j < s->k; ++j) xt[j * s->m + i] = p.x_u8[i * s->k + j];
  }
  args.x = s->conv ? xt.data() : p.x_u8.data();
  args.ld_x = s->conv ? s->m : s->k;
  args.x_zero_point = 128;
  args.w = &*packed;
  args.out = out.Epilogue(s->conv ? s->m : s->n);
  const char* name = "";
  for (auto _ : state) {
    Status st = RunSpmmBsrS8(args, &name);
    if (!st.ok()) return state.SkipWithError(st.ToString().c_str());
    benchmark::DoNotOptimize(out.q.data());
  }
  SetCounters(state, *s, std::string(name) + " block_density=" + std::to_string(packed->stats.block_density()));
}

void BenchF32Nm(benchmark::State& state, const LayerShape* s) {
  const Problem& p = ProblemFor(*s);
  StatusOr<NmF32> packed = PackNm(p.w_nm.data(), s->n, s->k, PackedFormat::kNm2of4F32);
  if (!packed.ok()) return state.SkipWithError(packed.status().ToString().c_str());
  std::vector<float> y(s->m * s->n);
  SpmmNmF32Args args;
  args.layout = s->conv ? SpmmLayout::kTransposed : SpmmLayout::kRowMajor;
  args.m = s->m;
  args.x = s->conv ? p.xt.data() : p.x.data();
  args.ld_x = s->conv ? s->m : s->k;
  args.w = &*packed;
  args.y = y.data();
  args.ld_y = s->conv ? s->m : s->n;
  const char* name = "";
  for (auto _ : state) {
    Status st = RunSpmmNmF32(args, &name);
    if (!st.ok()) return state.SkipWithError(st.ToString().c_str());
    benchmark::DoNotOptimize(y.data());
  }
  SetCounters(state, *s, name);
}

template <PackedFormat kFormat>
void BenchS8Nm(benchmark::State& state, const LayerShape* s) {
  const Problem& p = ProblemFor(*s);
  const std::vector<int8_t>& w = kFormat == PackedFormat::kNm2of4S8 ? p.w_s8_nm24 : p.w_s8_nm48;
  StatusOr<NmS8> packed = PackNm(w.data(), s->n, s->k, kFormat);
  if (!packed.ok()) return state.SkipWithError(packed.status().ToString().c_str());
  StatusOr<NmS8Panels> panels = PrepackSpmmNmS8(*packed);  // once, as gemm_s8's weights are packed once
  if (!panels.ok()) return state.SkipWithError(panels.status().ToString().c_str());
  U8Output out = MakeU8Output(*s);
  SpmmNmS8Args args;
  args.panels = &*panels;
  args.layout = s->conv ? SpmmLayout::kTransposed : SpmmLayout::kRowMajor;
  args.m = s->m;
  std::vector<uint8_t> xt;
  if (s->conv) {
    xt.resize(p.x_u8.size());
    for (int64_t i = 0; i < s->m; ++i)
      for (int64_t j = 0; j < s->k; ++j) xt[j * s->m + i] = p.x_u8[i * s->k + j];
  }
  args.x = s->conv ? xt.data() : p.x_u8.data();
  args.ld_x = s->conv ? s->m : s->k;
  args.x_zero_point = 128;
  args.w = &*packed;
  args.out = out.Epilogue(s->conv ? s->m : s->n);
  const char* name = "";
  for (auto _ : state) {
    Status st = RunSpmmNmS8(args, &name);
    if (!st.ok()) return state.SkipWithError(st.ToString().c_str());
    benchmark::DoNotOptimize(out.q.data());
  }
  SetCounters(state, *s, name);
}

#if defined(__x86_64__)
// The FP32 peak of one core: 24 independent AVX-512 FMA chains, no memory
// traffic. A GEMM's GOPS over this is its fraction of peak.
__attribute__((target("avx512f"))) void BenchF32PeakAvx512(benchmark::State& state) {
  __m512 acc[24];
  for (int i = 0; i < 24; ++i) acc[i] = _mm512_set1_ps(0.001f * static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.9999f), b = _mm512_set1_ps(1e-4f);
  constexpr int64_t kSteps = 1 << 16;
  for (auto _ : state) {
    for (int64_t step = 0; step < kSteps; ++step) {
#pragma GCC unroll 24
      for (int i = 0; i < 24; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
    }
    benchmark::DoNotOptimize(acc);
  }
  state.counters["GOPS"] =
      benchmark::Counter(2.0 * 16 * 24 * kSteps * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel("24 zmm FMA chains");
}
#endif

void RegisterAll() {
#if defined(__x86_64__)
  if (ActiveIsa() >= CpuIsa::kAvx512)
    benchmark::RegisterBenchmark("peak/fma_f32_avx512", BenchF32PeakAvx512)->Unit(benchmark::kMillisecond);
#endif
  for (const LayerShape& s : kShapes) {
    const std::string base =
        std::string(s.name) + "/M" + std::to_string(s.m) + "_N" + std::to_string(s.n) + "_K" + std::to_string(s.k);
    benchmark::RegisterBenchmark((base + "/f32_ref").c_str(), BenchF32Ref, &s)->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((base + "/f32_dense").c_str(), BenchF32Dense, &s)->Unit(benchmark::kMillisecond);
    if (s.conv) {
      benchmark::RegisterBenchmark((base + "/f32_pointwise").c_str(), BenchF32Pointwise, &s)
          ->Unit(benchmark::kMillisecond);
    }
    benchmark::RegisterBenchmark((base + "/s8_dense").c_str(), BenchS8Dense, &s)->Unit(benchmark::kMillisecond);
    if (s.conv) {
      benchmark::RegisterBenchmark((base + "/s8_conv").c_str(), BenchS8Conv, &s)->Unit(benchmark::kMillisecond);
    }
#if SPARQ_BENCH_HAVE_DNNL
    benchmark::RegisterBenchmark((base + "/f32_onednn").c_str(), BenchF32OneDnn, &s)->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((base + "/s8_onednn").c_str(), BenchS8OneDnn, &s)->Unit(benchmark::kMillisecond);
#endif
    benchmark::RegisterBenchmark((base + "/f32_bsr4x4").c_str(), BenchF32Bsr, &s)->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((base + "/s8_bsr4x4").c_str(), BenchS8Bsr<false>, &s)->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((base + "/s8_bsr4x4_50").c_str(), BenchS8Bsr<true>, &s)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((base + "/f32_nm24").c_str(), BenchF32Nm, &s)->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((base + "/s8_nm24").c_str(), BenchS8Nm<PackedFormat::kNm2of4S8>, &s)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((base + "/s8_nm48").c_str(), BenchS8Nm<PackedFormat::kNm4of8S8>, &s)
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace
}  // namespace sparq

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (!sparq::IsaEnvironmentStatus().ok()) {
    std::fprintf(stderr, "%s\n", sparq::IsaEnvironmentStatus().ToString().c_str());
    return 1;
  }
  benchmark::AddCustomContext("sparq_isa", sparq::CpuIsaName(sparq::ActiveIsa()));
#if SPARQ_BENCH_HAVE_DNNL
  omp_set_num_threads(1);  // every kernel on one thread
  benchmark::AddCustomContext("onednn", "linked, 1 thread");
#endif
  sparq::RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
