/* Panel layout of matmul weights, the layout decode streams fastest.
 *
 * A row-major weight W[N, K] is stored as panels of TERN_PANEL_ROWS rows;
 * inside a panel the rows are interleaved in chunks of TERN_PANEL_K
 * elements: chunk c of rows 0..11, then chunk c+1 of rows 0..11, and so on.
 * Element (n, k) of W sits at element offset
 *     (n / 12) * 12 * Kp + (k / 32) * 384 + (n % 12) * 32 + k % 32
 * where Kp is K rounded up to a multiple of 32; N is rounded up to a
 * multiple of 12. The padding is zero. A decode product then reads each
 * panel front to back as one sequential stream, and the arithmetic of every
 * output element is the same as on the row-major matrix (matmul.h). */
#ifndef TERN_CPU_PANEL_H
#define TERN_CPU_PANEL_H

#include <stddef.h>

#include "tern/dtype.h"

enum { TERN_PANEL_ROWS = 12, TERN_PANEL_K = 32 };

/* Padded depth Kp of a panel matrix. */
static inline long tern_panel_kp(int K)
{
    return ((long)K + TERN_PANEL_K - 1) / TERN_PANEL_K * TERN_PANEL_K;
}

/* Number of panels of an N-row matrix. */
static inline int tern_panel_count(int N)
{
    return (N + TERN_PANEL_ROWS - 1) / TERN_PANEL_ROWS;
}

/* Element offset of (n, k) in the panel layout. */
static inline long tern_panel_offset(int K, int n, long k)
{
    return (long)(n / TERN_PANEL_ROWS) * TERN_PANEL_ROWS * tern_panel_kp(K) +
           (k / TERN_PANEL_K) * (TERN_PANEL_ROWS * TERN_PANEL_K) +
           (long)(n % TERN_PANEL_ROWS) * TERN_PANEL_K + k % TERN_PANEL_K;
}

/* Bytes of the panel copy of an [N, K] matrix of dtype dt (F32, F16, BF16). */
size_t tern_cpu_panel_bytes(tern_dtype dt, int N, int K);

/* Writes panels [p0, p1) of the panel copy of src (borrowed, row-major
 * [N, K]) into dst (borrowed, tern_cpu_panel_bytes large), padding
 * included. Disjoint panel ranges may be packed concurrently. */
void tern_cpu_panel_pack(const void *src, tern_dtype dt, int N, int K, void *dst, int p0, int p1);

#endif
