/* tern/system.h on the CPU backend. */
#include "tern/system.h"

#include "backend/cpu/isa.h"
#include "backend/cpu/stream_triad.h"
#include "core/threadpool.h"

const char *tern_cpu_kernels(void) { return tern_cpu_isa_name(tern_cpu_isa_active()); }

double tern_stream_triad_gbps(int n_threads, size_t bytes_per_array)
{
    tern_pool *pool = NULL;
    if (tern_pool_create(n_threads > 0 ? n_threads : 1, &pool)) return 0.0;
    double g = tern_cpu_stream_triad_gbps(pool, bytes_per_array);
    tern_pool_free(pool);
    return g;
}
