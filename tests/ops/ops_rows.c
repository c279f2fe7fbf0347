/* Per-row ops against the CPU reference: RMSNorm (rtol 1e-6 of the row's
 * scale, a few ulps), rope with the CPU's table (1e-6), the fused per-head
 * norm + rope (bit-identical to the unfused GPU ops), SwiGLU's silu*up
 * (rtol 1e-6: expf of two libraries), add and embedding gather (exact). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/ops.h"
#include "ops_harness.h"

static void rmsnorm_case(int n, int d, tern_dtype wdt)
{
    char name[120];
    snprintf(name, sizeof name, "rmsnorm %s n=%d d=%d", tern_dtype_name(wdt), n, d);
    float *x = malloc((size_t)n * d * 4), *want = malloc((size_t)n * d * 4), *got = malloc((size_t)n * d * 4);
    float *wf = malloc((size_t)d * 4);
    ops_fill(x, (long)n * d, (unsigned)(n + d), 3.0f);
    ops_fill(wf, d, (unsigned)d, 2.0f);
    void *w = ops_to_dtype(wf, d, wdt);
    tern_cpu_rmsnorm(x, want, n, d, w, wdt, 1e-6f);
    float *dx = ops_dev(x, (size_t)n * d * 4);
    void *dw = ops_dev(w, (size_t)d * tern_dtype_size(wdt));
    if (ops_ok(tern_cuda_rmsnorm(ops_cuda, dx, dx, n, d, dw, wdt, 1e-6f), name)) {
        ops_get(got, dx, (size_t)n * d * 4);
        ops_compare(name, got, want, NULL, (long)n * d, 1e-7, 2e-6);
    }
    tern_cuda_free(ops_cuda, dx);
    tern_cuda_free(ops_cuda, dw);
    free(x); free(want); free(got); free(wf); free(w);
}

/* Rope (and the Qwen3 per-head norm before it) on n tokens at scattered
 * positions, table from the CPU's tern_cpu_rope_table. */
static void rope_case(int n, int n_heads, int hd, int rope_dim, int with_norm)
{
    char name[120];
    snprintf(name, sizeof name, "%s n=%d heads=%d hd=%d rope_dim=%d", with_norm ? "head_norm_rope" : "rope", n,
             n_heads, hd, rope_dim);
    int n_pos = 4096, half = rope_dim / 2;
    long ldx = (long)n_heads * hd + 64; /* a strided view, as inside a fused qkv output */
    float *inv = malloc((size_t)half * 4), *cs = malloc((size_t)n_pos * rope_dim * 4);
    int *all = malloc((size_t)n_pos * sizeof *all), *pos = malloc((size_t)n * sizeof *pos);
    for (int i = 0; i < half; i++) inv[i] = powf(1000000.0f, -2.0f * i / rope_dim);
    for (int p = 0; p < n_pos; p++) all[p] = p;
    tern_cpu_rope_table(n_pos, rope_dim, all, inv, 1.0f, cs);
    for (int t = 0; t < n; t++) pos[t] = (t * 977 + 5) % n_pos;
    float *x = malloc((size_t)n * ldx * 4), *want = malloc((size_t)n * ldx * 4), *got = malloc((size_t)n * ldx * 4);
    float *wf = malloc((size_t)hd * 4), *tab = malloc((size_t)n * rope_dim * 4);
    ops_fill(x, (long)n * ldx, (unsigned)(n * hd), 2.0f);
    ops_fill(wf, hd, 3u, 1.5f);
    memcpy(want, x, (size_t)n * ldx * 4);
    float *tight = malloc((size_t)n * n_heads * hd * 4);
    for (int t = 0; t < n; t++) memcpy(tight + (long)t * n_heads * hd, x + t * ldx, (size_t)n_heads * hd * 4);
    if (with_norm) tern_cpu_rmsnorm(tight, tight, n * n_heads, hd, wf, TERN_DT_F32, 1e-6f);
    for (int t = 0; t < n; t++) memcpy(tab + (long)t * rope_dim, cs + (long)pos[t] * rope_dim, (size_t)rope_dim * 4);
    tern_cpu_rope(tight, n, n_heads, hd, rope_dim, tab);
    for (int t = 0; t < n; t++) memcpy(want + t * ldx, tight + (long)t * n_heads * hd, (size_t)n_heads * hd * 4);
    float *dx = ops_dev(x, (size_t)n * ldx * 4), *dcs = ops_dev(cs, (size_t)n_pos * rope_dim * 4);
    float *dw = ops_dev(wf, (size_t)hd * 4);
    int *dpos = ops_dev(pos, (size_t)n * sizeof *pos);
    tern_status st = with_norm ? tern_cuda_head_norm_rope(ops_cuda, dx, ldx, n, n_heads, hd, rope_dim, dw, TERN_DT_F32,
                                                          1e-6f, dcs, dpos)
                               : tern_cuda_rope(ops_cuda, dx, ldx, n, n_heads, hd, rope_dim, dcs, dpos);
    if (ops_ok(st, name)) {
        ops_get(got, dx, (size_t)n * ldx * 4);
        ops_compare(name, got, want, NULL, (long)n * ldx, 1e-6, 2e-6);
        if (with_norm) {
            /* Fused == rmsnorm over heads, then rope (on a tight copy). */
            float *sep = malloc((size_t)n * n_heads * hd * 4);
            for (int t = 0; t < n; t++) memcpy(tight + (long)t * n_heads * hd, x + t * ldx, (size_t)n_heads * hd * 4);
            float *dt = ops_dev(tight, (size_t)n * n_heads * hd * 4);
            ops_ok(tern_cuda_rmsnorm(ops_cuda, dt, dt, n * n_heads, hd, dw, TERN_DT_F32, 1e-6f), name);
            ops_ok(tern_cuda_rope(ops_cuda, dt, (long)n_heads * hd, n, n_heads, hd, rope_dim, dcs, dpos), name);
            ops_get(sep, dt, (size_t)n * n_heads * hd * 4);
            for (int t = 0; t < n; t++) memcpy(tight + (long)t * n_heads * hd, got + t * ldx, (size_t)n_heads * hd * 4);
            ops_same("  fused == rmsnorm then rope", tight, sep, (long)n * n_heads * hd);
            tern_cuda_free(ops_cuda, dt);
            free(sep);
        }
    }
    tern_cuda_free(ops_cuda, dx); tern_cuda_free(ops_cuda, dcs); tern_cuda_free(ops_cuda, dw); tern_cuda_free(ops_cuda, dpos);
    free(inv); free(cs); free(all); free(pos); free(x); free(want); free(got); free(wf); free(tab); free(tight);
}

static void elementwise_cases(long count)
{
    char name[120];
    float *g = malloc((size_t)count * 4), *u = malloc((size_t)count * 4), *got = malloc((size_t)count * 4);
    ops_fill(g, count, 1u, 12.0f);
    ops_fill(u, count, 2u, 3.0f);
    float *dg = ops_dev(g, (size_t)count * 4), *du = ops_dev(u, (size_t)count * 4);
    snprintf(name, sizeof name, "silu_mul n=%ld", count);
    if (ops_ok(tern_cuda_silu_mul(ops_cuda, dg, du, count), name)) {
        ops_get(got, dg, (size_t)count * 4);
        float *want = malloc((size_t)count * 4);
        memcpy(want, g, (size_t)count * 4);
        tern_cpu_silu_mul(want, u, count);
        ops_compare(name, got, want, NULL, count, 1e-30, 2e-6);
        free(want);
    }
    ops_ok(tern_cuda_upload(ops_cuda, dg, g, (size_t)count * 4), "upload");
    snprintf(name, sizeof name, "add n=%ld", count);
    if (ops_ok(tern_cuda_add(ops_cuda, dg, du, count), name)) {
        ops_get(got, dg, (size_t)count * 4);
        tern_cpu_add(g, u, count);
        ops_same(name, got, g, count);
    }
    tern_cuda_free(ops_cuda, dg);
    tern_cuda_free(ops_cuda, du);
    free(g); free(u); free(got);
}

static void embed_case(tern_dtype dt, int vocab, int d, int n)
{
    char name[120];
    snprintf(name, sizeof name, "embed %s vocab=%d d=%d n=%d", tern_dtype_name(dt), vocab, d, n);
    float *tf = malloc((size_t)vocab * d * 4), *want = malloc((size_t)n * d * 4), *got = malloc((size_t)n * d * 4);
    int32_t *ids = malloc((size_t)n * 4);
    ops_fill(tf, (long)vocab * d, 9u, 1.0f);
    void *t = ops_to_dtype(tf, (long)vocab * d, dt);
    for (int i = 0; i < n; i++) {
        ids[i] = (i * 7919 + 3) % vocab;
        tern_cpu_to_f32((const char *)t + (size_t)ids[i] * d * tern_dtype_size(dt), dt, d, want + (long)i * d);
    }
    void *dtab = ops_dev(t, (size_t)vocab * d * tern_dtype_size(dt));
    int32_t *dids = ops_dev(ids, (size_t)n * 4);
    float *dout = ops_dev_zero((size_t)n * d * 4);
    if (ops_ok(tern_cuda_embed(ops_cuda, dids, n, dtab, dt, d, dout), name)) {
        ops_get(got, dout, (size_t)n * d * 4);
        ops_same(name, got, want, (long)n * d);
    }
    tern_cuda_free(ops_cuda, dtab); tern_cuda_free(ops_cuda, dids); tern_cuda_free(ops_cuda, dout);
    free(tf); free(want); free(got); free(ids); free(t);
}

void ops_rows(void)
{
    static const tern_dtype dts[] = {TERN_DT_F32, TERN_DT_BF16, TERN_DT_F16};
    for (int i = 0; i < 3; i++) {
        rmsnorm_case(1, 4096, dts[i]);
        rmsnorm_case(7, 1000, dts[i]);
        rmsnorm_case(33, 128, dts[i]);
        rmsnorm_case(3, 5120, dts[i]);
        embed_case(dts[i], 5000, 1024, 9);
    }
    rope_case(1, 32, 128, 128, 0);
    rope_case(37, 8, 128, 64, 0);
    rope_case(5, 4, 64, 64, 0);
    rope_case(1, 32, 128, 128, 1);
    rope_case(19, 8, 128, 128, 1);
    rope_case(3, 2, 256, 128, 1);
    elementwise_cases(1);
    elementwise_cases(12288 * 5 + 3);
}
