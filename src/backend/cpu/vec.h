/* Small float32 vector kernels for attention (q.k over head_dim, the
 * softmax-weighted sum of v rows), dispatched on the active ISA (isa.h).
 *
 * Determinism: the result depends only on the inputs and n (a fixed
 * accumulation order per ISA), never on the caller's batch or thread split.
 * All pointers are borrowed; n >= 0. */
#ifndef TERN_CPU_VEC_H
#define TERN_CPU_VEC_H

/* sum_i a[i]*b[i] */
float tern_vec_dot_f32(const float *a, const float *b, int n);
/* y[i] += a*x[i] (elementwise, fused multiply-add on SIMD ISAs) */
void tern_vec_axpy_f32(float *y, float a, const float *x, int n);

#endif
