// libFuzzer target: .npz parsing (sparq/npy.h: a zip of .npy members, stored
// or deflated). Seeded with numpy's own files (tools/run_fuzzers.sh), so the
// mutations start from valid zip structures rather than from .npy headers.
//
// Any input must give arrays or an error Status, never a crash, an over-read
// or a huge allocation (zip bombs included: sizes are checked before
// inflating). What parses must survive a write/read round trip.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sparq/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto npz = sparq::ParseNpz(bytes, "fuzz.npz");
  if (!npz.ok()) return 0;
  auto again = sparq::SerializeNpz(*npz);
  if (!again.ok()) return 0;  // e.g. types numpy cannot hold
  auto back = sparq::ParseNpz(*again, "round trip");
  if (!back.ok() || back->size() != npz->size()) __builtin_trap();
  for (size_t i = 0; i < npz->size(); ++i) {
    if ((*back)[i].first != (*npz)[i].first || !(*back)[i].second.Equals((*npz)[i].second)) __builtin_trap();
  }
  return 0;
}
