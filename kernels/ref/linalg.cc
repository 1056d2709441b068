#include "kernels/ref/linalg.h"

#include <cmath>

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

namespace {

// M = L^-1 of a lower triangular L (row-major k x k, upper triangle ignored),
// row by row: m_i = (e_i - sum_{p<i} L[i][p] m_p) / L[i][i].
std::vector<double> InvertLower(const std::vector<double>& l, int64_t k) {
  std::vector<double> m(static_cast<size_t>(k * k), 0.0);
  for (int64_t i = 0; i < k; ++i) {
    const double* li = l.data() + i * k;
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
  return m;
}

}  // namespace

bool UpperCholeskyOfInverse(std::vector<double>& a, int64_t k) {
  // With J the order reversal: J A J = L L^T gives A^-1 = U^T U for
  // U = J L^-1 J, upper triangular with a positive diagonal.
  std::vector<double> r(static_cast<size_t>(k * k));
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < k; ++j) r[i * k + j] = a[(k - 1 - i) * k + (k - 1 - j)];
  if (!Cholesky(r, k)) return false;
  const std::vector<double> m = InvertLower(r, k);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < k; ++j) a[i * k + j] = j >= i ? m[(k - 1 - i) * k + (k - 1 - j)] : 0.0;
  return true;
}

}  // namespace sparq
