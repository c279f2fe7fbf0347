/* Matrix products against checkpoint weights: y[M,N] = x[M,K] · W[N,K]^T.
 *
 * x and y are float32, row-major; W is [N,K] in its stored dtype (F32, F16
 * or BF16), row-major (tern_cpu_matmul: read in place, usually an mmapped
 * checkpoint) or in the panel layout of panel.h (tern_cpu_matmul_multi).
 * All pointers are borrowed. Accumulation is float32.
 *
 * Batch invariance: every y[m,n] is computed by the same sequence of
 * operations whatever M, the other rows of x, and the thread count, so a row
 * gives bit-identical results alone or inside any batch. */
#ifndef TERN_CPU_MATMUL_H
#define TERN_CPU_MATMUL_H

#include "core/threadpool.h"
#include "tern/dtype.h"
#include "tern/status.h"

typedef enum {
    /* activations stay float32: the reference path (parity with HF float32) */
    TERN_ACT_F32 = 0,
    /* activations are rounded to bf16 before the product with BF16 weights
     * (F32/F16 weights are unaffected) and quantized to int8 per weight
     * group before the product with quantized weights (matmul_q.h): the
     * fast path */
    TERN_ACT_BF16 = 1
} tern_act_mode;

tern_status tern_cpu_matmul(tern_pool *pool, tern_act_mode mode, const float *x, int M, int K,
                            const void *w, tern_dtype wdt, int N, float *y);

/* How a weight matrix is laid out in memory. The layout never changes a
 * result: each y[m, n] is computed by the same operations in every layout. */
typedef enum {
    TERN_WL_ROWS = 0,       /* row-major [N, K] (e.g. a checkpoint mapped in place) */
    TERN_WL_PANELS,         /* panel layout (panel.h; qpanel.h for quantized
                               formats), ordinary pages: decode prefetches
                               ahead in software */
    TERN_WL_PANELS_HUGE     /* panel layout in huge pages: the hardware
                               prefetcher keeps the stream going alone */
} tern_wlayout;

/* A quantized matrix (wdt MLX_Q4 / MLX_Q8): what tern_mm_out.w points to.
 * All pointers borrowed. */
typedef struct {
    const void *codes;          /* TERN_WL_ROWS: uint32 words [n, K*bits/32] as
                                   stored; panels: the whole qpanel.h copy */
    const void *scales, *biases;/* TERN_WL_ROWS: [n, K / group] in sdt;
                                   panels: NULL (they live in the copy) */
    tern_dtype sdt;             /* F32, F16 or BF16 */
    int group;                  /* inputs per scale: 32, 64 or 128 (16: GGUF Q6_K) */
    /* what codes holds in TERN_WL_ROWS: TERN_DT_U32 = MLX packed words (the
     * scalar kernel reads them in place); a GGUF block format = its raw rows,
     * which only the panel copy makes computable */
    tern_dtype src;
    /* panels: the scale form of the copy (qpanel.h tern_qform; 0 = affine:
     * scales and biases in sdt) */
    int form;
} tern_qmat;

/* One output of tern_cpu_matmul_multi: y[M, n] = x . w[n, K]^T. */
typedef struct {
    const void *w;      /* borrowed, [n, K] in the given layout; a tern_qmat
                           for the quantized formats */
    tern_dtype wdt;
    int n;
    float *y;           /* borrowed, [M, n] */
    tern_wlayout layout;
} tern_mm_out;

enum { TERN_MM_MAX_OUTS = 8 };

/* Several products of the same x (q/k/v, gate/up) in one parallel pass:
 * one pool run and one activation rounding for all. Each y is
 * bit-identical to a tern_cpu_matmul call with the same arguments. */
tern_status tern_cpu_matmul_multi(tern_pool *pool, tern_act_mode mode, const float *x, int M,
                                  int K, const tern_mm_out *outs, int n_outs);

/* y[m * ldy + n] = x[m, :] . w[n, :] for float32 x [M, K] and row-major
 * float32 w [N, K], on the calling thread, straight into a strided y: the
 * kernel tern_cpu_matmul runs for the same arguments, without its planning
 * (attention's score products, one per KV block). */
void tern_cpu_matmul_f32_rows(const float *x, int M, int K, const float *w, int N, float *y, long ldy);

/* The scalar reference every fast kernel is tested against (single thread). */
void tern_cpu_matmul_ref(tern_act_mode mode, const float *x, int M, int K, const void *w,
                         tern_dtype wdt, int N, float *y);

#endif
