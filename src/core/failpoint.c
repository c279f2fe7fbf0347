#include "core/failpoint.h"

#include <stdatomic.h>
#include <stdlib.h>

static _Atomic long armed[TERN_FAILPOINT_COUNT];   /* 0 = off; else allocations until the failing one */
static _Atomic long counted[TERN_FAILPOINT_COUNT];

void tern_failpoint_arm(tern_failpoint_site site, long n)
{
    if (site < 0 || site >= TERN_FAILPOINT_COUNT) return;
    atomic_store(&armed[site], n > 0 ? n : 0);
    atomic_store(&counted[site], 0);
}

long tern_failpoint_count(tern_failpoint_site site)
{
    return site < 0 || site >= TERN_FAILPOINT_COUNT ? 0 : atomic_load(&counted[site]);
}

/* True when this allocation is the armed one (which disarms the site). */
static int hit(tern_failpoint_site site)
{
    atomic_fetch_add(&counted[site], 1);
    long a = atomic_load(&armed[site]);
    while (a > 0) {
        if (atomic_compare_exchange_weak(&armed[site], &a, a - 1)) return a == 1;
    }
    return 0;
}

void *tern_fp_malloc(tern_failpoint_site site, size_t n)
{
    return hit(site) ? NULL : malloc(n ? n : 1);
}

void *tern_fp_calloc(tern_failpoint_site site, size_t count, size_t size)
{
    return hit(site) ? NULL : calloc(count ? count : 1, size ? size : 1);
}

void *tern_fp_realloc(tern_failpoint_site site, void *p, size_t n)
{
    return hit(site) ? NULL : realloc(p, n ? n : 1);
}

void *tern_fp_aligned_alloc(tern_failpoint_site site, size_t align, size_t n)
{
    return hit(site) ? NULL : aligned_alloc(align, n ? n : align);
}
