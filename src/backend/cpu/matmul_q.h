/* Matrix products against quantized weights (MLX_Q4, MLX_Q8), with the
 * dequantisation fused into the product: y[m, n] = sum_k x[m, k] * w[n, k],
 * w[n, k] = s[n, g] * q[n, k] + b[n, g], g = k / group.
 *
 * The activations of each row are prepared once per call (per group size):
 *   sx[m, g] = sum of x[m, k] over group g, for the bias term: in double,
 *              8 partial sums (partial l takes the k = l mod 8 in order),
 *              added ((p0+p4)+(p2+p6))+((p1+p5)+(p3+p7)), rounded to float
 *              (a vector kernel computes the same sums);
 *   TERN_ACT_BF16 (the fast path): x quantized per group to int8,
 *              dx = max|x| / 127, xq = round(x * 127 / max|x|) (to nearest even);
 *   TERN_ACT_F32 (the reference path): x as it is.
 * Then every output element is this serial chain, in group order:
 *   int8:  acc = fma((float) sum_k q*xq, s*dx, acc); acc = fma(b, sx, acc)
 *   f32:   aq = fma(q_k, x_k, aq) for k in order (aq from 0);
 *          acc = fma(aq, s, acc);                   acc = fma(b, sx, acc)
 * (acc from 0). In the compact panel forms of the GGUF formats s and b are
 * computed from the stored block scales, exactly the float32 values the
 * affine form holds (qpanel.h), and a code with high bits is the integer
 * low + 16 * high, so the chain and its results are those of the affine
 * form. The integer sums are exact in any order, so the vector
 * kernels (one 32-bit lane per weight row, qpanel.h) compute exactly the
 * operations of the scalar kernel: results are bit-identical across ISAs,
 * layouts, batch sizes, other rows and thread counts (tested).
 *
 * All pointers are borrowed. */
#ifndef TERN_CPU_MATMUL_Q_H
#define TERN_CPU_MATMUL_Q_H

#include <stdint.h>

#include "backend/cpu/matmul.h"
#include "backend/cpu/qpanel.h"

/* y for the quantized outputs outs[0..n_outs) (every wdt quantized),
 * checked and dispatched as tern_cpu_matmul_multi documents. */
tern_status tern_cpu_matmul_q(tern_pool *pool, tern_act_mode mode, const float *x, int M, int K,
                              const tern_mm_out *outs, int n_outs);

/* Checks one quantized output's description against K (group, layout,
 * scales present); TERN_OK or an error naming the problem. */
tern_status tern_cpu_matmul_q_check(const tern_mm_out *o, int K);

/* Prepared activations of rows [0, M) for one group size. */
typedef struct {
    int mode;               /* tern_act_mode */
    int K, group, G;        /* G = K / group */
    const float *xf;        /* f32: x [M, K] */
    const int8_t *xq;       /* int8: [M, K] */
    const float *dx;        /* int8: [M, G] */
    const float *sx;        /* [M, G] */
} tern_qact;

/* Computes y[m, n] for m0 <= m < m1, n0 <= n < n1 of output o (panels:
 * n0 a multiple of TERN_QP_ROWS); y row m at o->y + m * o->n. */
typedef void (*tern_qmm_kernel)(const tern_qact *a, int m0, int m1, const tern_mm_out *o,
                                int n0, int n1);

/* Per-ISA kernels over qpanel.h panels, [mode][kernel index]; NULL
 * entries fall back to the scalar kernels. */
/* Prepares rows [0, M) of x as tern_qact_prepare documents (one ISA's
 * version; every version gives identical bytes). */
typedef void (*tern_qact_fn)(tern_act_mode mode, const float *x, int M, int K, int group, float *sx,
                             float *dx, int8_t *xq);

/* Kernel index of a panel copy: 0 / 1 affine 4 / 8 bits, 1 + form for the
 * compact forms of qpanel.h. */
enum { TERN_QK_COUNT = 1 + TERN_QF_COUNT };

typedef struct {
    tern_qmm_kernel panels[2][TERN_QK_COUNT];
    tern_qact_fn prep;      /* NULL: the portable one */
} tern_qmm_table;

void tern_qmm_table_avx2(tern_qmm_table *t);
void tern_qmm_table_avx512(tern_qmm_table *t);

/* Fills a, borrowing scratch (caller-provided, tern_qact_bytes large);
 * prep NULL: the portable preparation. */
size_t tern_qact_bytes(tern_act_mode mode, int M, int K, int group);
void tern_qact_prepare(tern_act_mode mode, const float *x, int M, int K, int group, void *scratch,
                       tern_qact_fn prep, tern_qact *a);

/* The portable preparation of one group of gs activations xg (borrowed):
 * *sx, and for TERN_ACT_BF16 *dx and q[0..gs). */
void tern_qact_group(tern_act_mode mode, const float *xg, int group, float *sx, float *dx, int8_t *q);

/* The scalar kernels (also the reference the tests hold the others to). */
void tern_qmm_scalar(const tern_qact *a, int m0, int m1, const tern_mm_out *o, int n0, int n1);

#endif
