// The one progress bar of the `sparq` tool (run, eval, calibrate): a line on
// stderr redrawn in place, with the count against its total, the rate and the
// time left.
//
//   calibrate        [##########              ] 96/256 samples  1234.5 samples/s  ETA 0:01
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace sparq {
namespace cli {

// The bar's text for `done` of `total` (`total` < 0: not known, so no bar and
// no ETA), at `rate` units per second (<= 0: not known yet), `seconds` after
// the start.
std::string FormatProgress(const std::string& label, int64_t done, int64_t total, const std::string& unit,
                           double rate, double seconds);

class ProgressBar {
 public:
  // Redraws the line; a new `label` ends the previous line and restarts the
  // clock. `seconds`: time since the work began, when the caller knows it;
  // else the rate is measured from this label's first update on.
  void Update(const std::string& label, int64_t done, int64_t total, const std::string& unit, double seconds = -1);
  // Ends the current line (if any) so that other output starts on a fresh one.
  void End();

 private:
  std::string label_;
  bool drawn_ = false;
  int64_t first_done_ = 0;  // `done` at this label's first update
  std::chrono::steady_clock::time_point first_;
};

}  // namespace cli
}  // namespace sparq
