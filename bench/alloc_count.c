/* Heap allocation counter for benchmarks (bench/memory_plan.py --allocs):
 * an LD_PRELOAD shim that counts the calls of malloc, calloc, realloc and the
 * aligned allocators (operator new reaches malloc through libstdc++), and the
 * bytes asked for, and at exit appends one line
 *
 *   allocations <calls> bytes <bytes>
 *
 * to the file named by $SPARQ_ALLOC_COUNT_FILE (stderr when unset). It
 * forwards to glibc's own entry points (__libc_malloc, ...), so it needs no
 * dlsym and counts from the first allocation. Not part of sparq: built by the
 * benchmark that uses it,
 *
 *   cc -O2 -shared -fPIC -o alloc_count.so bench/alloc_count.c
 *   SPARQ_ALLOC_COUNT_FILE=out.txt LD_PRELOAD=./alloc_count.so build/bin/sparq eval ...
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern void* __libc_malloc(size_t size);
extern void* __libc_calloc(size_t n, size_t size);
extern void* __libc_realloc(void* p, size_t size);
extern void* __libc_memalign(size_t alignment, size_t size);

static atomic_ullong g_calls;
static atomic_ullong g_bytes;

static void Count(size_t bytes) {
  atomic_fetch_add_explicit(&g_calls, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&g_bytes, bytes, memory_order_relaxed);
}

void* malloc(size_t size) {
  Count(size);
  return __libc_malloc(size);
}

void* calloc(size_t n, size_t size) {
  Count(n * size);
  return __libc_calloc(n, size);
}

void* realloc(void* p, size_t size) {
  Count(size);
  return __libc_realloc(p, size);
}

void* memalign(size_t alignment, size_t size) {
  Count(size);
  return __libc_memalign(alignment, size);
}

void* aligned_alloc(size_t alignment, size_t size) {
  Count(size);
  return __libc_memalign(alignment, size);
}

int posix_memalign(void** out, size_t alignment, size_t size) {
  if (alignment % sizeof(void*) != 0 || (alignment & (alignment - 1)) != 0) return EINVAL;
  Count(size);
  void* p = __libc_memalign(alignment, size);
  if (p == NULL && size != 0) return ENOMEM;
  *out = p;
  return 0;
}

__attribute__((destructor)) static void Report(void) {
  const char* path = getenv("SPARQ_ALLOC_COUNT_FILE");
  FILE* f = path != NULL && path[0] != '\0' ? fopen(path, "a") : stderr;
  if (f == NULL) return;
  fprintf(f, "allocations %llu bytes %llu\n", (unsigned long long)atomic_load(&g_calls),
          (unsigned long long)atomic_load(&g_bytes));
  if (f != stderr) fclose(f);
}
