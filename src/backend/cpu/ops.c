#include "backend/cpu/ops.h"

#include <math.h>
#include <string.h>

#include "backend/cpu/isa.h"
#include "backend/cpu/vec.h"

/* Weights are read with memcpy: checkpoints written by mlx-lm do not align
 * their tensors, so a vector may start at any byte. */
static float weight_at(const void *w, tern_dtype dt, long i)
{
    if (dt == TERN_DT_F32) {
        float f;
        memcpy(&f, (const char *)w + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, (const char *)w + 2 * i, 2);
    return dt == TERN_DT_BF16 ? tern_bf16_to_f32(h) : tern_f16_to_f32(h);
}

void tern_cpu_to_f32(const void *src, tern_dtype dt, long n, float *dst)
{
    for (long i = 0; i < n; i++) dst[i] = weight_at(src, dt, i);
}

void tern_cpu_rmsnorm(const float *x, float *y, int n, int d, const void *w, tern_dtype wdt, float eps)
{
    for (int r = 0; r < n; r++) {
        const float *xr = x + (long)r * d;
        float *yr = y + (long)r * d;
        float ss = tern_vec_dot_f32(xr, xr, d);
        float inv = 1.0f / sqrtf(ss / (float)d + eps);
        for (int i = 0; i < d; i++) yr[i] = (xr[i] * inv) * weight_at(w, wdt, i);
    }
}

void tern_cpu_rope_table(int n, int rope_dim, const int *pos, const float *inv_freq, float attn_factor,
                         float *cs)
{
    int half = rope_dim / 2;
    for (int t = 0; t < n; t++) {
        float p = (float)pos[t];
        float *c = cs + (long)t * rope_dim;
        for (int i = 0; i < half; i++) {
            float ang = p * inv_freq[i];
            c[i] = cosf(ang) * attn_factor;
            c[half + i] = sinf(ang) * attn_factor;
        }
    }
}

void tern_cpu_rope(float *x, int n, int n_heads, int head_dim, int rope_dim, const float *cs)
{
    int half = rope_dim / 2;
    for (int t = 0; t < n; t++) {
        const float *c = cs + (long)t * rope_dim, *s = c + half;
        for (int h = 0; h < n_heads; h++) {
            float *v = x + ((long)t * n_heads + h) * head_dim;
            for (int i = 0; i < half; i++) {
                float a = v[i], b = v[i + half];
                v[i] = a * c[i] - b * s[i];
                v[i + half] = b * c[i] + a * s[i];
            }
        }
    }
}

void tern_cpu_silu_mul(float *g, const float *u, long count)
{
    if (tern_cpu_isa_active() == TERN_CPU_ISA_AVX512) {
        tern_cpu_silu_mul_avx512(g, u, count);
        return;
    }
    for (long i = 0; i < count; i++) {
        float a = g[i];
        g[i] = a / (1.0f + expf(-a)) * u[i];
    }
}

void tern_cpu_add(float *y, const float *x, long count)
{
    for (long i = 0; i < count; i++) y[i] += x[i];
}

void tern_cpu_softmax(float *x, int n)
{
    if (tern_cpu_isa_active() == TERN_CPU_ISA_AVX512) {
        tern_cpu_softmax_avx512(x, n);
        return;
    }
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    float inv = 1.0f / sum;
    for (int i = 0; i < n; i++) x[i] *= inv;
}
