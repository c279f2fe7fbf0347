/* Private interface between the matmul dispatcher (matmul.c) and the
 * ISA-specific kernel files (matmul_avx2.c, matmul_avx512.c).
 *
 * A block kernel computes y[m, n] for 0 <= m < M, n0 <= n < n1:
 *   x: borrowed activations, row m at x + m*ldx (elements of the table's
 *      activation type), y: borrowed output, row m at y + m*ldy,
 *   w: borrowed weights [N, K] in the kernel's dtype, laid out as layout
 *      (a tern_wlayout: row-major, or panels of panel.h; for panels n0 is a
 *      multiple of TERN_PANEL_ROWS).
 * Arithmetic contract (batch invariance): each y[m, n] is one fixed sequence
 * of operations over x row m and w row n (vector accumulator in K order,
 * fixed tail, fixed horizontal reduction), whatever M, n0, n1 or the tile a
 * kernel happens to use for it. */
#ifndef TERN_CPU_MATMUL_KERN_H
#define TERN_CPU_MATMUL_KERN_H

#include <stdint.h>

typedef void (*tern_mm_kernel)(const void *x, long ldx, int M, int K, const void *w,
                               int layout, int n0, int n1, float *y, long ldy);

/* Rounds x [M, K] float32 to bf16 (RNE, elementwise) into out (borrowed),
 * row m at out + m*ldo elements; the element type and row padding are the
 * table's act_* fields. */
typedef void (*tern_mm_round_fn)(const float *x, int M, int K, void *out, long ldo);

typedef struct {
    /* float32 activations, indexed by weight dtype F32, F16, BF16 */
    tern_mm_kernel f32act[3];
    /* TERN_ACT_BF16 with BF16 weights: activations prepared by round_act */
    tern_mm_kernel bf16act;
    tern_mm_round_fn round_act;
    int act_elem_bytes;     /* 2: packed bf16; 4: float32 holding bf16 values */
    int act_k_align;        /* rows of the rounded activations are padded with
                               zeros to a multiple of this many elements */
} tern_mm_table;

/* Fill the table for one ISA (called once). */
void tern_mm_table_avx2(tern_mm_table *t);
void tern_mm_table_avx512(tern_mm_table *t);

#endif
