#include "backend/cpu/qpanel.h"

#include <stdint.h>
#include <string.h>

size_t tern_cpu_qpanel_bytes(int bits, int group, tern_dtype sdt, int N, int K)
{
    return (size_t)tern_qp_count(N) * tern_qp_panel_bytes(bits, group, sdt, K);
}

/* Code k of row-major row r (bytes little-endian, as the uint32 words are). */
static inline unsigned code_at(const uint8_t *r, int bits, int k)
{
    if (bits == 8) return r[k];
    return (r[k >> 1] >> ((k & 1) * 4)) & 15u;
}

void tern_cpu_qpanel_pack(const void *codes, const void *scales, const void *biases,
                          tern_dtype sdt, int bits, int group, int N, int K, void *dst,
                          int p0, int p1)
{
    const int per_unit = 32 / bits, units = group / per_unit, G = K / group;
    const size_t row_bytes = (size_t)K * (size_t)bits / 8, ss = tern_dtype_size(sdt);
    const size_t cb = tern_qp_codes_bytes(bits, group);
    for (int p = p0; p < p1; p++) {
        uint8_t *panel = (uint8_t *)dst + (size_t)p * tern_qp_panel_bytes(bits, group, sdt, K);
        for (int g = 0; g < G; g++) {
            uint8_t *rec = panel + (size_t)g * tern_qp_record_bytes(bits, group, sdt);
            memset(rec, 0, tern_qp_record_bytes(bits, group, sdt));
            for (int j = 0; j < TERN_QP_ROWS; j++) {
                int n = p * TERN_QP_ROWS + j;
                if (n >= N) break;
                const uint8_t *r = (const uint8_t *)codes + (size_t)n * row_bytes;
                for (int u = 0; u < units; u++) {
                    int k0 = g * group + u * per_unit;
                    uint8_t *o = rec + (size_t)u * TERN_QP_UNIT + 4 * j;
                    for (int i = 0; i < 4; i++)
                        o[i] = bits == 8 ? (uint8_t)code_at(r, 8, k0 + i)
                                         : (uint8_t)(code_at(r, 4, k0 + i) |
                                                     code_at(r, 4, k0 + 4 + i) << 4);
                }
                size_t si = ((size_t)n * (size_t)G + (size_t)g) * ss;
                memcpy(rec + cb + (size_t)j * ss, (const uint8_t *)scales + si, ss);
                memcpy(rec + cb + (TERN_QP_ROWS + (size_t)j) * ss, (const uint8_t *)biases + si, ss);
            }
        }
    }
}

void tern_cpu_qpanel_pack_rows(const uint8_t *codes, const void *scales, const void *biases,
                               tern_dtype sdt, int bits, int group, int nrows, int K, void *dst)
{
    const int per_unit = 32 / bits, units = group / per_unit, G = K / group;
    const size_t ss = tern_dtype_size(sdt), cb = tern_qp_codes_bytes(bits, group);
    const size_t rb = tern_qp_record_bytes(bits, group, sdt);
    memset(dst, 0, (size_t)G * rb);
    for (int g = 0; g < G; g++) {
        uint8_t *rec = (uint8_t *)dst + (size_t)g * rb;
        for (int j = 0; j < nrows; j++) {
            const uint8_t *r = codes + (size_t)j * (size_t)K;
            for (int u = 0; u < units; u++) {
                int k0 = g * group + u * per_unit;
                uint8_t *o = rec + (size_t)u * TERN_QP_UNIT + 4 * j;
                for (int i = 0; i < 4; i++)
                    o[i] = bits == 8 ? r[k0 + i] : (uint8_t)(r[k0 + i] | r[k0 + 4 + i] << 4);
            }
            size_t si = ((size_t)j * (size_t)G + (size_t)g) * ss;
            memcpy(rec + cb + (size_t)j * ss, (const uint8_t *)scales + si, ss);
            memcpy(rec + cb + (TERN_QP_ROWS + (size_t)j) * ss, (const uint8_t *)biases + si, ss);
        }
    }
}

void tern_cpu_qpanel_pack_compact(tern_qform form, const uint8_t *codes, const uint16_t *d,
                                  const uint16_t *dmin, const uint8_t *sc, const uint8_t *m, int nrows,
                                  int K, void *dst)
{
    const tern_qform_info f = tern_qform_get(form);
    const int per_unit = 32 / f.bits, units = f.group / per_unit, G = K / f.group, S = G / f.sbg;
    const size_t lo_bytes = (size_t)units * TERN_QP_UNIT, hdr = f.sub == 2 ? 64 : 32;
    memset(dst, 0, tern_qf_panel_bytes(f, K));
    for (int j = 0; j < nrows; j++) {
        const uint8_t *r = codes + (size_t)j * (size_t)K;
        for (int g = 0; g < G; g++) {
            const uint8_t *cr, *chr;
            tern_qf_locate(f, dst, G, g, &cr, &chr);
            uint8_t *rec = (uint8_t *)cr, *ch = (uint8_t *)chr;
            const uint8_t *c = r + (size_t)g * f.group;
            for (int u = 0; u < units; u++) {
                uint8_t *o = rec + (size_t)u * TERN_QP_UNIT + 4 * j;
                for (int i = 0; i < 4; i++) {
                    int k = u * per_unit + i;
                    o[i] = f.bits == 8 ? c[k] : (uint8_t)((c[k] & 15) | (c[k + 4] & 15) << 4);
                }
            }
            if (f.hb) {
                uint8_t *o = rec + lo_bytes + 4 * j;
                for (int t = 0; t < 8 / f.hb; t++)
                    for (int i = 0; i < 4; i++) o[i] |= (uint8_t)((c[4 * t + i] >> 4) << (f.hb * t));
            }
            /* the superblock's block scales with its first group, the sub-scales with each */
            int sb = g / f.sbg, gi = g % f.sbg;
            if (gi == 0) {
                memcpy(ch + 2 * j, d + (size_t)j * S + sb, 2);
                if (f.sub == 2) memcpy(ch + 32 + 2 * j, dmin + (size_t)j * S + sb, 2);
            }
            if (f.sub) {
                uint8_t *sg = ch + hdr + (size_t)gi * TERN_QP_ROWS * (size_t)f.sub;
                sg[j] = sc[(size_t)j * G + g];
                if (f.sub == 2) sg[TERN_QP_ROWS + j] = m[(size_t)j * G + g];
            }
        }
    }
}
