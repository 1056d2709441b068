#include "sparq/memory.h"

#include <sys/resource.h>

namespace sparq {

double PeakRssMiB() {
  struct rusage u;
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0.0;
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // Linux: KiB
}

}  // namespace sparq
