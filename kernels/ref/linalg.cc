#include "kernels/ref/linalg.h"

#include <cmath>

#include "kernels/ref/gemm.h"

namespace sparq {

double DotF64(const double* a, const double* b, int64_t n) {
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < n; ++i) s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

bool Cholesky(std::vector<double>& a, int64_t k) {
  for (int64_t i = 0; i < k; ++i) {
    double* ai = a.data() + i * k;
    for (int64_t j = 0; j <= i; ++j) {
      const double* aj = a.data() + j * k;
      const double s = ai[j] - DotF64(ai, aj, j);
      if (j == i) {
        if (!(s > 0.0)) return false;
        ai[i] = std::sqrt(s);
      } else {
        ai[j] = s / aj[j];
      }
    }
  }
  return true;
}

void CholeskySolve(const std::vector<double>& l, int64_t k, std::vector<double>& b) {
  for (int64_t i = 0; i < k; ++i) {
    const double* li = l.data() + i * k;
    b[i] = (b[i] - DotF64(li, b.data(), i)) / li[i];
  }
  for (int64_t i = k; i-- > 0;) {
    const double* li = l.data() + i * k;
    b[i] /= li[i];
    for (int64_t p = 0; p < i; ++p) b[p] -= li[p] * b[i];
  }
}

bool InvertSpd(std::vector<double>& a, int64_t k, ThreadPool* pool) {
  if (!Cholesky(a, k)) return false;
  // M = L^-1, lower triangular, row by row: m_i = (e_i - sum_{p<i} L[i][p] m_p) / L[i][i].
  std::vector<double> m(static_cast<size_t>(k * k), 0.0);
  for (int64_t i = 0; i < k; ++i) {
    const double* li = a.data() + i * k;
    double* mi = m.data() + i * k;
    for (int64_t p = 0; p < i; ++p) {
      const double f = li[p];
      const double* mp = m.data() + p * k;
      for (int64_t j = 0; j <= p; ++j) mi[j] -= f * mp[j];
    }
    mi[i] += 1.0;
    const double inv = 1.0 / li[i];
    for (int64_t j = 0; j <= i; ++j) mi[j] *= inv;
  }
  // A^-1 = L^-T L^-1 = M^T M.
  GemmF64Ref(true, false, k, k, k, 1.0, m.data(), k, m.data(), k, 0.0, a.data(), k, pool);
  return true;
}

}  // namespace sparq
