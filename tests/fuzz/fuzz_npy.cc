// libFuzzer target: .npy and .npz parsing (sparq/npy.h).
//
// Any input must give a value or an error Status, never a crash, an
// over-read or a huge allocation. What parses must survive a write/read
// round trip unchanged.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sparq/npy.h"

namespace {

// Aborts (a finding) when a parsed tensor does not round-trip.
void CheckRoundTrip(const sparq::Tensor& t) {
  auto bytes = sparq::SerializeNpy(t);
  if (!bytes.ok()) return;  // e.g. types numpy cannot hold
  auto back = sparq::ParseNpy(*bytes, "round trip");
  if (!back.ok() || !back->Equals(t)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto header = sparq::ParseNpyHeader(bytes, "fuzz.npy");
  auto npy = sparq::ParseNpy(bytes, "fuzz.npy");
  if (npy.ok()) {
    if (!header.ok()) __builtin_trap();  // a file that parses has a header that parses
    CheckRoundTrip(*npy);
  }
  auto npz = sparq::ParseNpz(bytes, "fuzz.npz");
  if (npz.ok()) {
    for (const auto& named : *npz) CheckRoundTrip(named.second);
    auto again = sparq::SerializeNpz(*npz);
    if (again.ok() && !sparq::ParseNpz(*again, "round trip").ok()) __builtin_trap();
  }
  return 0;
}
