/* STREAM-style triad bandwidth probe: the memory-bandwidth ceiling that
 * decode (weight streaming) is measured against. */
#ifndef TERN_CPU_STREAM_TRIAD_H
#define TERN_CPU_STREAM_TRIAD_H

#include <stddef.h>

#include "core/threadpool.h"

/* Runs a[i] = b[i] + s*c[i] over three float64 arrays of bytes_per_array
 * bytes each (choose >> last-level cache), split across the pool (borrowed;
 * NULL = calling thread only), and returns the best of several repetitions
 * in GB/s (1e9 bytes), counting 3 * bytes_per_array per pass as STREAM does.
 * Returns 0.0 when the arrays cannot be allocated. */
double tern_cpu_stream_triad_gbps(tern_pool *pool, size_t bytes_per_array);

#endif
