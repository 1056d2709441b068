#include "sparq/version.h"

namespace sparq {

const char* Version() { return SPARQ_VERSION_STRING; }

}  // namespace sparq
