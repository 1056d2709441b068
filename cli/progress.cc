#include "cli/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace sparq {
namespace cli {
namespace {

std::string Clock(double seconds) {
  const long long s = static_cast<long long>(std::llround(seconds));
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
  }
  return buf;
}

}  // namespace

std::string FormatProgress(const std::string& label, int64_t done, int64_t total, const std::string& unit,
                           double rate, double seconds) {
  constexpr int kWidth = 30;
  char buf[256];
  std::string line;
  std::snprintf(buf, sizeof buf, "%-16s ", label.c_str());
  line += buf;
  if (total > 0) {
    const int filled = static_cast<int>(kWidth * std::min(done, total) / total);
    line += "[" + std::string(filled, '#') + std::string(kWidth - filled, ' ') + "] ";
    std::snprintf(buf, sizeof buf, "%lld/%lld %s", static_cast<long long>(done), static_cast<long long>(total),
                  unit.c_str());
  } else {
    std::snprintf(buf, sizeof buf, "%lld %s", static_cast<long long>(done), unit.c_str());
  }
  line += buf;
  if (rate > 0) {
    std::snprintf(buf, sizeof buf, "  %.1f %s/s", rate, unit.c_str());
    line += buf;
    if (total > 0) line += "  " + std::string(done >= total ? "done in " + Clock(seconds) : "ETA " + Clock((total - done) / rate));
  }
  return line;
}

void ProgressBar::Update(const std::string& label, int64_t done, int64_t total, const std::string& unit,
                         double seconds) {
  const auto now = std::chrono::steady_clock::now();
  if (!drawn_ || label != label_) {
    End();
    label_ = label;
    first_ = now;
    first_done_ = done;
  }
  double rate = 0.0;
  if (seconds > 0) {
    rate = static_cast<double>(done) / seconds;
  } else {
    seconds = std::chrono::duration<double>(now - first_).count();
    if (seconds > 0) rate = static_cast<double>(done - first_done_) / seconds;
  }
  // Padded so that a shorter line wipes the end of a longer one.
  std::fprintf(stderr, "\r%-100s", FormatProgress(label, done, total, unit, rate, seconds).c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::End() {
  if (drawn_) std::fprintf(stderr, "\n");
  drawn_ = false;
}

}  // namespace cli
}  // namespace sparq
