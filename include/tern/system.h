/* Facts about the machine tern runs on, for benchmarks and tools: a
 * monotonic clock, the CPU kernel family in use, and a memory-bandwidth
 * probe (the ceiling that decode speed is compared with). */
#ifndef TERN_SYSTEM_H
#define TERN_SYSTEM_H

#include <stddef.h>

/* Seconds on a monotonic clock. */
double tern_now(void);
/* Name of the CPU kernels in use ("avx512", "avx2", "scalar"); static string. */
const char *tern_cpu_kernels(void);
/* STREAM-triad bandwidth in GB/s over n_threads threads and three arrays of
 * bytes_per_array bytes (best of a few passes); 0 on failure. */
double tern_stream_triad_gbps(int n_threads, size_t bytes_per_array);

#endif
