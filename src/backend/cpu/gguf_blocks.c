#include "backend/cpu/gguf_blocks.h"

#include <math.h>
#include <string.h>

static float h2f(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return tern_f16_to_f32(h);
}

static void scale_min_k4(int j, const uint8_t *s, int *sc, int *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* Code of element e (0..255) of a Q4_K / Q5_K block, and its sub-block. */
static int code_k(tern_dtype dt, const uint8_t *b, int e)
{
    int sub = e / 32, l = e % 32, c = sub / 2, hi = sub & 1;
    const uint8_t *qs = b + (dt == TERN_DT_Q4_K ? 16 : 48);
    int q = (qs[32 * c + l] >> (4 * hi)) & 15;
    if (dt == TERN_DT_Q5_K) q |= ((b[16 + l] >> sub) & 1) << 4;
    return q;
}

static int code_q6k(const uint8_t *b, int e)
{
    int n = e / 128, j = (e % 128) / 32, l = e % 32;
    const uint8_t *ql = b, *qh = b + 128;
    int lo = (ql[64 * n + 32 * (j & 1) + l] >> (4 * (j >> 1))) & 15;
    int hb = (qh[32 * n + l] >> (2 * j)) & 3;
    return lo | hb << 4;    /* 0..63; the value is this minus 32 */
}

void tern_gguf_dequant(tern_dtype dt, const void *src, long n, float *out)
{
    const uint8_t *b = src;
    switch (dt) {
    case TERN_DT_F32: memcpy(out, src, (size_t)n * 4); return;
    case TERN_DT_F16:
        for (long i = 0; i < n; i++) out[i] = h2f(b + 2 * i);
        return;
    case TERN_DT_BF16:
        for (long i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, b + 2 * i, 2);
            out[i] = tern_bf16_to_f32(h);
        }
        return;
    case TERN_DT_Q8_0:
        for (long k = 0; k < n; k += 32, b += 34) {
            float d = h2f(b);
            for (int i = 0; i < 32; i++) out[k + i] = (float)(int8_t)b[2 + i] * d;
        }
        return;
    case TERN_DT_Q4_0:
        for (long k = 0; k < n; k += 32, b += 18) {
            float d = h2f(b);
            for (int i = 0; i < 16; i++) {
                out[k + i] = d * (float)((b[2 + i] & 15) - 8);
                out[k + 16 + i] = d * (float)((b[2 + i] >> 4) - 8);
            }
        }
        return;
    case TERN_DT_Q4_K:
    case TERN_DT_Q5_K: {
        int bb = dt == TERN_DT_Q4_K ? 144 : 176;
        for (long k = 0; k < n; k += 256, b += bb) {
            float d = h2f(b), dmin = h2f(b + 2);
            for (int sub = 0; sub < 8; sub++) {
                int sc, m;
                scale_min_k4(sub, b + 4, &sc, &m);
                float ds = d * (float)sc, dm = dmin * (float)m;
                for (int l = 0; l < 32; l++) {
                    float q = (float)code_k(dt, b, sub * 32 + l);
                    float p = ds * q;
                    out[k + sub * 32 + l] = p - dm;
                }
            }
        }
        return;
    }
    case TERN_DT_Q6_K:
        for (long k = 0; k < n; k += 256, b += 210) {
            float d = h2f(b + 208);
            for (int e = 0; e < 256; e++) {
                float ds = d * (float)(int8_t)b[192 + e / 16];
                out[k + e] = ds * (float)(code_q6k(b, e) - 32);
            }
        }
        return;
    default:
        memset(out, 0, (size_t)n * sizeof *out);
        return;
    }
}

int tern_gguf_affine_of(tern_dtype dt, tern_gguf_affine *a)
{
    switch (dt) {
    case TERN_DT_Q8_0: *a = (tern_gguf_affine){8, 32, TERN_DT_F16}; return 1;
    case TERN_DT_Q4_0: *a = (tern_gguf_affine){4, 32, TERN_DT_F16}; return 1;
    case TERN_DT_Q4_K: *a = (tern_gguf_affine){4, 32, TERN_DT_F32}; return 1;
    case TERN_DT_Q5_K: *a = (tern_gguf_affine){8, 32, TERN_DT_F32}; return 1;
    case TERN_DT_Q6_K: *a = (tern_gguf_affine){8, 16, TERN_DT_F32}; return 1;
    default: return 0;
    }
}

/* float16 bias -m*d: exact when it does not overflow (a power-of-two multiple). */
static int put_f16(void *p, long i, float v)
{
    uint16_t h = tern_f32_to_f16(v);
    memcpy((uint8_t *)p + 2 * i, &h, 2);
    return isfinite(tern_f16_to_f32(h)) ? 0 : -1;
}

int tern_gguf_affine_row(tern_dtype dt, const void *src, int K, uint8_t *codes, void *scales, void *biases)
{
    const uint8_t *b = src;
    float *fs = scales, *fb = biases;
    int bad = 0;
    switch (dt) {
    case TERN_DT_Q8_0:
        for (int k = 0, g = 0; k < K; k += 32, g++, b += 34) {
            memcpy((uint8_t *)scales + 2 * g, b, 2);
            bad |= put_f16(biases, g, -128.0f * h2f(b));
            for (int i = 0; i < 32; i++) codes[k + i] = (uint8_t)((int8_t)b[2 + i] + 128);
        }
        break;
    case TERN_DT_Q4_0:
        for (int k = 0, g = 0; k < K; k += 32, g++, b += 18) {
            memcpy((uint8_t *)scales + 2 * g, b, 2);
            bad |= put_f16(biases, g, -8.0f * h2f(b));
            for (int i = 0; i < 16; i++) {
                codes[k + i] = b[2 + i] & 15;
                codes[k + 16 + i] = b[2 + i] >> 4;
            }
        }
        break;
    case TERN_DT_Q4_K:
    case TERN_DT_Q5_K: {
        int bb = dt == TERN_DT_Q4_K ? 144 : 176;
        for (int k = 0; k < K; k += 256, b += bb) {
            float d = h2f(b), dmin = h2f(b + 2);
            for (int sub = 0; sub < 8; sub++) {
                int sc, m;
                scale_min_k4(sub, b + 4, &sc, &m);
                fs[k / 32 + sub] = d * (float)sc;
                fb[k / 32 + sub] = -(dmin * (float)m);
                for (int l = 0; l < 32; l++) codes[k + sub * 32 + l] = (uint8_t)code_k(dt, b, sub * 32 + l);
            }
        }
        break;
    }
    case TERN_DT_Q6_K:
        for (int k = 0; k < K; k += 256, b += 210) {
            float d = h2f(b + 208);
            for (int s = 0; s < 16; s++) {
                float ds = d * (float)(int8_t)b[192 + s];
                fs[k / 16 + s] = ds;
                fb[k / 16 + s] = -32.0f * ds;
            }
            for (int e = 0; e < 256; e++) codes[k + e] = (uint8_t)code_q6k(b, e);
        }
        break;
    default:
        return -1;
    }
    return bad ? -1 : 0;
}

tern_qform tern_gguf_qform(tern_dtype dt)
{
    switch (dt) {
    case TERN_DT_Q8_0: return TERN_QF_Q8_0;
    case TERN_DT_Q4_0: return TERN_QF_Q4_0;
    case TERN_DT_Q4_K: return TERN_QF_Q4_K;
    case TERN_DT_Q5_K: return TERN_QF_Q5_K;
    case TERN_DT_Q6_K: return TERN_QF_Q6_K;
    default: return TERN_QF_AFFINE;
    }
}

void tern_gguf_compact_row(tern_dtype dt, const void *src, int K, uint8_t *codes, uint16_t *d,
                           uint16_t *dmin, uint8_t *sc, uint8_t *m)
{
    const uint8_t *b = src;
    switch (dt) {
    case TERN_DT_Q8_0:
        for (int k = 0, g = 0; k < K; k += 32, g++, b += 34) {
            memcpy(d + g, b, 2);
            for (int i = 0; i < 32; i++) codes[k + i] = (uint8_t)((int8_t)b[2 + i] + 128);
        }
        return;
    case TERN_DT_Q4_0:
        for (int k = 0, g = 0; k < K; k += 32, g++, b += 18) {
            memcpy(d + g, b, 2);
            for (int i = 0; i < 16; i++) {
                codes[k + i] = b[2 + i] & 15;
                codes[k + 16 + i] = b[2 + i] >> 4;
            }
        }
        return;
    case TERN_DT_Q4_K:
    case TERN_DT_Q5_K: {
        int bb = dt == TERN_DT_Q4_K ? 144 : 176;
        for (int k = 0, s = 0; k < K; k += 256, s++, b += bb) {
            memcpy(d + s, b, 2);
            memcpy(dmin + s, b + 2, 2);
            for (int sub = 0; sub < 8; sub++) {
                int v, mv;
                scale_min_k4(sub, b + 4, &v, &mv);
                sc[k / 32 + sub] = (uint8_t)v;
                m[k / 32 + sub] = (uint8_t)mv;
                for (int l = 0; l < 32; l++) codes[k + sub * 32 + l] = (uint8_t)code_k(dt, b, sub * 32 + l);
            }
        }
        return;
    }
    case TERN_DT_Q6_K:
        for (int k = 0, s = 0; k < K; k += 256, s++, b += 210) {
            memcpy(d + s, b + 208, 2);
            memcpy(sc + k / 16, b + 192, 16);
            for (int e = 0; e < 256; e++) codes[k + e] = (uint8_t)code_q6k(b, e);
        }
        return;
    default:
        return;
    }
}
