// Adam (Kingma & Ba, 2015), the optimizer of sparq's gradient-based fits:
// block reconstruction after pruning and AdaRound rounding (internal to
// quant and the layers above it). Deterministic: plain loops in a fixed order,
// no threads, doubles for the moments' bias correction.
//
//   m = b1 m + (1 - b1) g        v = b2 v + (1 - b2) g^2
//   p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace sparq {

struct AdamOptions {
  double learning_rate = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
};

// The moments of one parameter tensor of `n` values.
class AdamState {
 public:
  AdamState() = default;
  AdamState(int64_t n, AdamOptions options)
      : options_(options), m_(static_cast<size_t>(n), 0.0f), v_(static_cast<size_t>(n), 0.0f) {}

  int64_t size() const { return static_cast<int64_t>(m_.size()); }
  int64_t steps() const { return t_; }
  void set_learning_rate(double lr) { options_.learning_rate = lr; }

  // One step on p[0, n) with gradient g[0, n); `mask` (optional, n bytes)
  // holds the entries where it is 0 (their moments stay 0).
  void Step(float* p, const float* g, const uint8_t* mask = nullptr) {
    ++t_;
    const double c1 = 1.0 - std::pow(options_.beta1, static_cast<double>(t_));
    const double c2 = 1.0 - std::pow(options_.beta2, static_cast<double>(t_));
    const float b1 = static_cast<float>(options_.beta1), b2 = static_cast<float>(options_.beta2);
    const float step = static_cast<float>(options_.learning_rate / c1);
    const float inv_c2 = static_cast<float>(1.0 / c2), eps = static_cast<float>(options_.epsilon);
    for (size_t i = 0; i < m_.size(); ++i) {
      if (mask && !mask[i]) continue;
      m_[i] = b1 * m_[i] + (1.0f - b1) * g[i];
      v_[i] = b2 * v_[i] + (1.0f - b2) * g[i] * g[i];
      p[i] -= step * m_[i] / (std::sqrt(v_[i] * inv_c2) + eps);
    }
  }

 private:
  AdamOptions options_;
  std::vector<float> m_, v_;
  int64_t t_ = 0;
};

}  // namespace sparq
