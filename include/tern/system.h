/* Small services for tools built on libtern: reading a stream whole, a
 * monotonic clock, the CPU kernel family in use, and a memory-bandwidth
 * probe (the ceiling that decode speed is compared with). */
#ifndef TERN_SYSTEM_H
#define TERN_SYSTEM_H

#include <stddef.h>

#include <stdio.h>

/* Reads f (borrowed; not closed) to its end. Returns an owned NUL-terminated
 * buffer (free()), or NULL on a read error or out of memory. */
char *tern_read_all(FILE *f);

/* Seconds on a monotonic clock. */
double tern_now(void);
/* Name of the CPU kernels in use ("avx512", "avx2", "scalar"); static string. */
const char *tern_cpu_kernels(void);
/* STREAM-triad bandwidth in GB/s over n_threads threads and three arrays of
 * bytes_per_array bytes (best of a few passes); 0 on failure. */
double tern_stream_triad_gbps(int n_threads, size_t bytes_per_array);

#endif
