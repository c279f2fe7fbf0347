/* Element-wise and per-row CPU operations of the decoder forward pass.
 * All pointers are borrowed; arrays are float32 row-major. Each output row
 * depends only on its own input row (batch invariance). */
#ifndef TERN_CPU_OPS_H
#define TERN_CPU_OPS_H

#include <stdint.h>

#include "core/threadpool.h"
#include "tern/dtype.h"

/* y[r] = x[r] / rms(x[r]) * w for n rows of width d (w in its stored dtype);
 * y may alias x. */
void tern_cpu_rmsnorm(const float *x, float *y, int n, int d, const void *w, tern_dtype wdt, float eps);

/* Writes cos and sin of pos[t] * inv_freq[i], each times attn_factor, for
 * n tokens: cs[t] = [cos[0..half), sin[0..half)], half = rope_dim / 2. */
void tern_cpu_rope_table(int n, int rope_dim, const int *pos, const float *inv_freq, float attn_factor,
                         float *cs);

/* Rotates the first rope_dim dims of each head of x [n, n_heads*head_dim]
 * (rotate-half pairing i <-> i + rope_dim/2) with the table above. */
void tern_cpu_rope(float *x, int n, int n_heads, int head_dim, int rope_dim, const float *cs);

/* g[i] = silu(g[i]) * u[i] for count elements. */
void tern_cpu_silu_mul(float *g, const float *u, long count);

/* y[i] += x[i] for count elements. */
void tern_cpu_add(float *y, const float *x, long count);

/* Converts n elements of a weight row to float32. */
void tern_cpu_to_f32(const void *src, tern_dtype dt, long n, float *dst);

/* In-place softmax over n values. */
void tern_cpu_softmax(float *x, int n);

/* AVX-512 variants (act_avx512.c), chosen by the functions above when the
 * active ISA allows. */
void tern_cpu_softmax_avx512(float *x, int n);
void tern_cpu_silu_mul_avx512(float *g, const float *u, long count);

#endif
