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
 * values, only reordered (no dequantised copy of a matrix is ever made).
 *
 * That is the affine form (TERN_QF_AFFINE, the MLX checkpoints'). The GGUF
 * block formats have compact forms that keep their scales as the file does
 * (float16 block scales, 6- or 8-bit sub-scales), so that a panel is no
 * larger than the file's blocks. A panel of a compact form is a sequence
 * of records of rg groups each (the last one may hold fewer), each record
 * its groups' codes, then their scales, then zeros to a multiple of 64
 * bytes (one sequential stream, every unit aligned):
 *
 *   codes of a group: the low 4 (or 8) code bits as the affine form's
 *             units, then, with hb high bits (code = low | high << 4), one
 *             unit where byte i of row j's lane holds, at bits hb*t ..
 *             hb*t+hb-1, the high bits of element 4t + i of the group
 *             (t < 8 / hb);
 *   scales:   per superblock of sbg groups (rg is a multiple of sbg), 16
 *             float16 d (row j at j), with sub == 2 also 16 float16 dmin,
 *             then per group of the superblock 16 sub-scales sc (int8 with
 *             sub == 1, uint8 with sub == 2), with sub == 2 followed by 16
 *             uint8 minimums m.
 *
 * Each form's scale s and bias b of a group are the float32 values the
 * block format defines, computed from these exactly (a float16 times an
 * integer below 2^8 and powers of two are exact in float32):
 *   Q8_0  8-bit codes q + 128, rg 2, sbg 1, sub 0:   s = d, b = -128 s
 *   Q4_0  4-bit codes,         rg 2, sbg 1, sub 0:   s = d, b = -8 s
 *   Q4_K  4-bit codes,         rg 8, sbg 8, sub 2:   s = d sc, b = -(dmin m)
 *   Q5_K  4 + 1 bits,          rg 8, sbg 8, sub 2:   the same
 *   Q6_K  4 + 2 bits, group 16, rg 16, sbg 16, sub 1: s = d sc, b = -32 s
 * which are the values the affine form of gguf_blocks.h holds in float32
 * (or exactly in float16), so both forms give bit-identical products. */
#ifndef TERN_CPU_QPANEL_H
#define TERN_CPU_QPANEL_H

#include <stddef.h>
#include <stdint.h>

#include "tern/dtype.h"

enum { TERN_QP_ROWS = 16, TERN_QP_UNIT = 64 };

/* The scale form of a quantized panel copy (tern_qmat.form). */
typedef enum {
    TERN_QF_AFFINE = 0,
    TERN_QF_Q8_0,
    TERN_QF_Q4_0,
    TERN_QF_Q4_K,
    TERN_QF_Q5_K,
    TERN_QF_Q6_K,
    TERN_QF_COUNT
} tern_qform;

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

/* A form's geometry: code bits of the low plane (4 or 8), high bits hb,
 * group, groups per record, groups per superblock, sub-scale kind (0 none,
 * 1 int8 sc, 2 uint8 sc and m with dmin), bias factor (sub < 2: b =
 * bias_k * s). */
typedef struct {
    int bits, hb, group, rg, sbg, sub, bias_k;
} tern_qform_info;

static inline tern_qform_info tern_qform_get(tern_qform f)
{
    switch (f) {
    case TERN_QF_Q8_0: return (tern_qform_info){8, 0, 32, 2, 1, 0, -128};
    case TERN_QF_Q4_0: return (tern_qform_info){4, 0, 32, 2, 1, 0, -8};
    case TERN_QF_Q4_K: return (tern_qform_info){4, 0, 32, 8, 8, 2, 0};
    case TERN_QF_Q5_K: return (tern_qform_info){4, 1, 32, 8, 8, 2, 0};
    case TERN_QF_Q6_K: return (tern_qform_info){4, 2, 16, 16, 16, 1, -32};
    default: return (tern_qform_info){0, 0, 0, 0, 0, 0, 0};
    }
}

/* Compact forms: bytes of one group's codes (low units, then the high unit). */
static inline size_t tern_qf_code_bytes(tern_qform_info f)
{
    return (size_t)TERN_QP_ROWS * (size_t)f.group * (size_t)f.bits / 8 + (f.hb ? TERN_QP_UNIT : 0);
}

/* Compact forms: bytes of one superblock's scales. */
static inline size_t tern_qf_chunk_bytes(tern_qform_info f)
{
    return (size_t)TERN_QP_ROWS * (2 * (size_t)(f.sub == 2 ? 2 : 1) + (size_t)f.sbg * (size_t)f.sub);
}

/* Compact forms: bytes of a record of n groups (n a multiple of sbg). */
static inline size_t tern_qf_record_bytes(tern_qform_info f, int n)
{
    size_t b = (size_t)n * tern_qf_code_bytes(f) + (size_t)(n / f.sbg) * tern_qf_chunk_bytes(f);
    return (b + 63) / 64 * 64;
}

/* Compact forms: bytes of one panel of K inputs (a multiple of group * sbg). */
static inline size_t tern_qf_panel_bytes(tern_qform_info f, int K)
{
    int G = K / f.group;
    return (size_t)(G / f.rg) * tern_qf_record_bytes(f, f.rg) + (G % f.rg ? tern_qf_record_bytes(f, G % f.rg) : 0);
}

/* Compact forms: where group g (of G) of a panel lives: *codes its codes,
 * *chunk its superblock's scales (the group's sub-scales at 32 or 64 bytes
 * into it plus (g % sbg) * 16 * sub). */
static inline void tern_qf_locate(tern_qform_info f, const uint8_t *panel, int G, int g,
                                  const uint8_t **codes, const uint8_t **chunk)
{
    int R = g / f.rg, j = g % f.rg, n = G - R * f.rg < f.rg ? G - R * f.rg : f.rg;
    const uint8_t *rec = panel + (size_t)R * tern_qf_record_bytes(f, f.rg);
    *codes = rec + (size_t)j * tern_qf_code_bytes(f);
    *chunk = rec + (size_t)n * tern_qf_code_bytes(f) + (size_t)(j / f.sbg) * tern_qf_chunk_bytes(f);
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

/* Writes one panel of compact form f (borrowed dst, tern_qf_panel_bytes
 * large) from up to 16 decoded rows (all borrowed): codes [nrows, K] one byte
 * each (< 2^(bits + hb)), d and dmin [nrows, K / (group * sbg)] float16 bits
 * (dmin: sub == 2 only), sc and m [nrows, K / group] (sc: sub >= 1, m: sub
 * == 2; int8 sub-scales as their bytes); rows past nrows are zero. */
void tern_cpu_qpanel_pack_compact(tern_qform f, const uint8_t *codes, const uint16_t *d,
                                  const uint16_t *dmin, const uint8_t *sc, const uint8_t *m, int nrows,
                                  int K, void *dst);

#endif
