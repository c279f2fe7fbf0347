/* Shared pieces of the CUDA op harness (ops_test): device buffers filled
 * from host arrays, comparisons with stated tolerances, and the tally. */
#ifndef TERN_OPS_HARNESS_H
#define TERN_OPS_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cuda/cuda.h"

extern tern_cuda *ops_cuda;
extern int ops_pass, ops_fail;

/* Deterministic uniform values in [-scale, scale). */
void ops_fill(float *x, long n, unsigned seed, float scale);
/* Host array (malloc, owned by the caller) of n elements of dt made from
 * f (rounded to dt); returns NULL for dtypes other than F32/F16/BF16. */
void *ops_to_dtype(const float *f, long n, tern_dtype dt);
/* Device copy of bytes of host memory (owned; tern_cuda_free). Aborts the
 * harness on failure: a device that cannot take a few megabytes is broken. */
void *ops_dev(const void *host, size_t bytes);
void *ops_dev_zero(size_t bytes);
/* n elements of dt made on the device, uniform in [-scale, scale) from seed
 * (tern_cuda_fill_random; owned, tern_cuda_free). */
void *ops_dev_random(long n, tern_dtype dt, unsigned seed, float scale);
void ops_get(void *host, const void *d, size_t bytes);
/* Checks that a tern_status is TERN_OK, recording a failure otherwise. */
int ops_ok(tern_status st, const char *what);

/* Records one case: max |got - want| <= atol + rtol * |want| (per element,
 * with |want| replaced by scale[i] when scale is non-NULL). Prints a line. */
void ops_compare(const char *name, const float *got, const float *want, const double *scale, long n, double atol,
                 double rtol);
/* Records one case that must be bit-identical. */
void ops_same(const char *name, const float *a, const float *b, long n);

/* The op families (ops_linear.c, ops_rows.c, ops_attn.c); time_mode prints
 * timings instead of checking. */
void ops_linear(void);
void ops_rows(void);
void ops_attention(void);
void ops_fused(void);
void ops_time(void);
void ops_time_chains(void);
/* ops_pair.c: one-row SwiGLU pairs over interleaved rows, checked; and timed (--chain). */
void ops_pair(void);
void ops_time_pair(void);
void ops_timeline(void);

#endif
