/* Allocation failure injection for tests.
 *
 * Code that can fail while the engine is serving (admission, KV growth, the
 * forward's workspace) allocates through tern_fp_malloc / tern_fp_calloc /
 * tern_fp_realloc with the site it belongs to. A test arms a site with n: the
 * n-th counted allocation at that site from then on fails (once), and
 * tern_failpoint_count reports how many allocations a site made, so a test can
 * walk n over every allocation of an operation. Unarmed, the wrappers are the
 * plain allocator plus one atomic increment. Thread-safe. */
#ifndef TERN_CORE_FAILPOINT_H
#define TERN_CORE_FAILPOINT_H

#include <stddef.h>

#include "tern/engine.h"

void *tern_fp_malloc(tern_failpoint_site site, size_t n);
void *tern_fp_calloc(tern_failpoint_site site, size_t count, size_t size);
void *tern_fp_realloc(tern_failpoint_site site, void *p, size_t n);
/* align a power of two, n a multiple of it; free() releases it. */
void *tern_fp_aligned_alloc(tern_failpoint_site site, size_t align, size_t n);

#endif
