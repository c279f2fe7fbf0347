/* Quantized panel layout: the layout the quantized matmul kernels stream.
 *
 * A quantized matrix W[N, K] (codes q of `bits` bits, one scale s and one
 * bias b per group of `group` inputs: w = s*q + b) is stored as panels of
 * TERN_QP_ROWS = 16 rows, so that one 512-bit register holds one 32-bit
 * lane per row. A panel is K / group group records, one after the other;
 * record g of panel p holds, for rows n = 16p + j (j = 0..15):
 *
 *   codes   group / U units of 64 bytes, U = 32 / bits inputs per unit
 *           (4 for 8 bits, 8 for 4 bits); unit u holds 4 bytes per row,
 *           row j at bytes 4j .. 4j+3:
 *             8 bits: byte i = q[n, k0 + i]                     (i = 0..3)
 *             4 bits: byte i = q[n, k0 + i] | q[n, k0 + 4 + i] << 4
 *           with k0 = g*group + u*U;
 *   scales  16 values in sdt (row j at index j);
 *   biases  16 values in sdt.
 *
 * Rows past N are zero (codes, scales and biases), so a kernel may compute
 * them and drop them. Records are multiples of 64 bytes, so a 64-byte
 * aligned copy keeps every unit aligned. The codes are the checkpoint's, the
 * scales and biases keep their dtype: the copy holds exactly the stored
 * values, only reordered (no dequantised copy of a matrix is ever made). */
#ifndef TERN_CPU_QPANEL_H
#define TERN_CPU_QPANEL_H

#include <stddef.h>
#include <stdint.h>

#include "tern/dtype.h"

enum { TERN_QP_ROWS = 16, TERN_QP_UNIT = 64 };

/* Bytes of the codes of one group record. */
static inline size_t tern_qp_codes_bytes(int bits, int group)
{
    return (size_t)TERN_QP_ROWS * (size_t)group * (size_t)bits / 8;
}

/* Bytes of one group record (codes, scales, biases). */
static inline size_t tern_qp_record_bytes(int bits, int group, tern_dtype sdt)
{
    return tern_qp_codes_bytes(bits, group) + 2 * TERN_QP_ROWS * tern_dtype_size(sdt);
}

/* Bytes of one panel. */
static inline size_t tern_qp_panel_bytes(int bits, int group, tern_dtype sdt, int K)
{
    return (size_t)(K / group) * tern_qp_record_bytes(bits, group, sdt);
}

static inline int tern_qp_count(int N)
{
    return (N + TERN_QP_ROWS - 1) / TERN_QP_ROWS;
}

/* Bytes of the panel copy of an [N, K] matrix. */
size_t tern_cpu_qpanel_bytes(int bits, int group, tern_dtype sdt, int N, int K);

/* Writes panels [p0, p1) of the panel copy of the row-major MLX matrix
 * (codes: uint32 words [N, K*bits/32]; scales, biases: [N, K/group] in sdt;
 * all borrowed) into dst (borrowed, tern_cpu_qpanel_bytes large). Disjoint
 * panel ranges may be packed concurrently. */
void tern_cpu_qpanel_pack(const void *codes, const void *scales, const void *biases,
                          tern_dtype sdt, int bits, int group, int N, int K, void *dst,
                          int p0, int p1);

/* Writes one panel (borrowed dst, tern_qp_panel_bytes large) from up to 16
 * unpacked rows: codes [nrows, K] one byte each (< 2^bits), scales and
 * biases [nrows, K / group] in sdt (all borrowed); rows past nrows are zero. */
void tern_cpu_qpanel_pack_rows(const uint8_t *codes, const void *scales, const void *biases,
                               tern_dtype sdt, int bits, int group, int nrows, int K, void *dst);

#endif
