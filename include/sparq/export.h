// SPARQ_API marks what libsparq exports: the declarations of include/sparq/.
// Everything else is built with hidden visibility, so internals (kernels,
// passes, helpers) are not part of the library's ABI.
#pragma once

#if defined(SPARQ_STATIC_DEFINE)
#define SPARQ_API
#else
#define SPARQ_API [[gnu::visibility("default")]]
#endif
