/* GGUF (ggml) block formats: dequantisation, their decomposition into the
 * affine form w = s * code + b of qpanel.h (float32 or float16 s and b per
 * group), and into the compact panel forms of qpanel.h (the block scales as
 * stored), which the model's panel copies use; matmul_q's kernels run both,
 * with bit-identical results.
 *
 * Block layouts (little-endian; d, dmin are float16):
 *   Q8_0  34 bytes / 32:  d, int8 q[32];                 w = q * d
 *   Q4_0  18 bytes / 32:  d, u8 qs[16]; element j is the low nibble of qs[j],
 *                         element j+16 the high one;     w = d * (q - 8)
 *   Q4_K 144 bytes / 256: d, dmin, u8 scales[12] (8 six-bit scales and mins),
 *                         u8 qs[128]: for c in 0..3, qs[32c..32c+32) holds
 *                         sub-block 2c in the low nibbles and 2c+1 in the high;
 *                         w = (d * sc) * q - dmin * m per 32-element sub-block
 *   Q5_K 176 bytes / 256: d, dmin, scales[12], u8 qh[32], u8 qs[128]: as Q4_K
 *                         plus bit i of qh[l] as bit 4 of element 32i + l
 *   Q6_K 210 bytes / 256: u8 ql[128], u8 qh[64], int8 scales[16], d: element
 *                         128n + 32j + l is ((ql[64n + 32(j&1) + l] >> 4(j>>1))
 *                         & 15) | ((qh[32n + l] >> 2j) & 3) << 4, minus 32;
 *                         w = (d * scales[e / 16]) * q
 * The six-bit scales of Q4_K / Q5_K: for j < 4, sc = scales[j] & 63, m =
 * scales[j+4] & 63; else sc = (scales[j+4] & 15) | (scales[j-4] >> 6) << 4,
 * m = (scales[j+4] >> 4) | (scales[j] >> 6) << 4.
 * Dequantisation follows gguf-py's float32 arithmetic operation for
 * operation, so it is bit-exact with it (tested). */
#ifndef TERN_CPU_GGUF_BLOCKS_H
#define TERN_CPU_GGUF_BLOCKS_H

#include <stdint.h>

#include "backend/cpu/qpanel.h"
#include "tern/dtype.h"

/* n elements (whole blocks) of a row in format dt (a GGUF block format or
 * F32/F16/BF16), borrowed src, into out[n]. */
void tern_gguf_dequant(tern_dtype dt, const void *src, long n, float *out);

/* The affine form of format dt: code bits of the panel (4 or 8), group
 * (elements per scale), dtype of the scales and biases in the panel. */
typedef struct {
    int bits, group;
    tern_dtype sdt;
} tern_gguf_affine;

/* 1 and *a for the GGUF block formats, 0 otherwise. */
int tern_gguf_affine_of(tern_dtype dt, tern_gguf_affine *a);

/* Decodes one row of K elements (borrowed src) into codes[K] (one byte
 * each), scales[K / group] and biases[K / group] in a.sdt (all borrowed).
 * Returns 0, or -1 when a bias does not fit the panel's dtype (a float16
 * scale so large that -128 d overflows: never seen in real files). */
int tern_gguf_affine_row(tern_dtype dt, const void *src, int K, uint8_t *codes, void *scales,
                         void *biases);

/* The compact panel form of format dt (qpanel.h), TERN_QF_AFFINE for
 * formats without one. */
tern_qform tern_gguf_qform(tern_dtype dt);

/* Decodes one row of K elements (borrowed src) of format dt, which has a
 * compact form f, into what tern_cpu_qpanel_pack_compact takes for one row
 * (all borrowed): codes[K] (the unsigned code: Q8_0 q + 128, Q6_K q + 32),
 * d[K / (group * sbg)] and dmin (Q4_K / Q5_K) as stored, sc[K / group]
 * (Q4_K / Q5_K six-bit values, Q6_K int8 bytes), m[K / group] (Q4_K / Q5_K). */
void tern_gguf_compact_row(tern_dtype dt, const void *src, int K, uint8_t *codes, uint16_t *d,
                           uint16_t *dmin, uint8_t *sc, uint8_t *m);

#endif
